// The client APIs the edge relays and which providers serve each. A request
// goes only to a provider that serves its API natively (passthrough, never
// translation: docs/passthrough.md), so every provider carries a set of
// endpoints: from its config `endpoints`, else by its type. The set travels
// as a small bit mask (one bit per API) through the scheduler's records.
import type { ConfigReader } from './config-reader.js';

export const ENDPOINTS = ['chat', 'completions', 'embeddings', 'messages', 'responses'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];

/** The API a request speaks, as its index in ENDPOINTS (what records carry). */
export const Api = { chat: 0, completions: 1, embeddings: 2, messages: 3, responses: 4 } as const satisfies Record<Endpoint, number>;
export type ApiKind = (typeof Api)[Endpoint];

/** vLLM and Ollama serve every API natively; a generic OpenAI-compatible server only the classic three. */
// Keyed by ProviderType (config-types.ts imports this file, so not the other way round).
const DEFAULTS: Readonly<Record<string, readonly Endpoint[]>> = {
  vllm: ENDPOINTS,
  ollama: ENDPOINTS,
  openai_compat: ['chat', 'completions', 'embeddings'],
  // The cli adapter renders runs as chat completions.
  cli: ['chat'],
};

export function defaultEndpoints(type: string): readonly Endpoint[] {
  return DEFAULTS[type] ?? DEFAULTS.openai_compat;
}

export function endpointMask(endpoints: readonly Endpoint[]): number {
  let mask = 0;
  for (const e of endpoints) mask |= 1 << Api[e];
  return mask;
}

export function servesApi(mask: number, api: ApiKind): boolean {
  return (mask & (1 << api)) !== 0;
}

export function endpointsOfMask(mask: number): Endpoint[] {
  return ENDPOINTS.filter((_, i) => (mask & (1 << i)) !== 0);
}

export function isEndpoint(name: string): name is Endpoint {
  return (ENDPOINTS as readonly string[]).includes(name);
}

/** Config `endpoints` (edge and agent alike): a list of API names; absent = the type's defaults. */
export function readEndpoints(r: ConfigReader, path: string, raw: unknown, type: string): readonly Endpoint[] {
  if (raw === undefined) return defaultEndpoints(type);
  const items = r.list(path, raw);
  // A provider serving no API holds a connection and is never sent a request: a slip, not a setting.
  if (Array.isArray(raw) && items.length === 0) r.problems.push(`${path}: an empty list serves no API, so the provider would never get a request; leave endpoints out for its type's defaults`);
  const out: Endpoint[] = [];
  for (const [i, item] of items.entries()) {
    const name = r.oneOf(`${path}[${i}]`, item, ENDPOINTS);
    // A cli run's answer is always a chat completion: another API's client (the Anthropic SDK) could not read it.
    if (type === 'cli' && name !== 'chat') {
      r.problems.push(`${path}[${i}]: a cli provider answers as chat completions only, so it serves chat alone (found ${name})`);
      continue;
    }
    if (!out.includes(name)) out.push(name);
  }
  return out;
}
