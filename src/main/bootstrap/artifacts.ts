// What the bootstrap listener hands out. The agent tarball is read from
// bootstrap.artifact_dir once, at start, and served from memory with the
// sha256 computed then: whatever happens to the directory afterwards, every
// node gets the same bytes and the same sum for the life of the process.
// The agent config is rendered per request from the running snapshot (a
// node added by a refresh can bootstrap at once) and summed with it.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import type { EdgeConfig, NodeConfig, NodeTlsConfig, ProviderType } from '../../shared/config-types.js';
import { StartError } from '../../shared/start-error.js';
import { defaultEndpoints, endpointMask, type Endpoint } from '../../shared/endpoints.js';

export const TARBALL_NAME = 'agent.tgz';
export const CONFIG_NAME = 'agent.yaml';
export const SUMS_NAME = 'SHA256SUMS';

export interface AgentTarball {
  /** The file's own name in artifact_dir (for logs); served as agent.tgz. */
  readonly sourceName: string;
  readonly bytes: Buffer;
  readonly sha256: string;
}

/** Where each provider type usually listens, for catalog entries without base_url. */
const DEFAULT_BASE_URLS: Readonly<Record<ProviderType, string | undefined>> = {
  ollama: 'http://127.0.0.1:11434',
  vllm: 'http://127.0.0.1:8000',
  openai_compat: 'http://127.0.0.1:8000',
  cli: undefined,
};

export function sha256Hex(bytes: string | Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The one *.tgz in the directory; none or several is a start-up error (which would be served is not a guess). */
export async function loadTarball(dir: string): Promise<AgentTarball> {
  let names: string[];
  try {
    names = (await readdir(dir, { withFileTypes: true })).filter((e) => e.isFile() && e.name.endsWith('.tgz')).map((e) => e.name);
  } catch (err) {
    throw new StartError(`bootstrap.artifact_dir: cannot read ${dir}: ${(err as Error).message}`);
  }
  if (names.length !== 1) throw new StartError(`bootstrap.artifact_dir: expected exactly one agent tarball (*.tgz, the output of npm pack) in ${dir}, found ${names.length}${names.length > 0 ? `: ${names.join(', ')}` : ''}`);
  const bytes = await readFile(join(dir, names[0]));
  return { sourceName: names[0], bytes, sha256: sha256Hex(bytes) };
}

/**
 * The agent config for one catalog node: ready to run as written, but for
 * what only the node's host knows (a cli provider's command; with TLS on
 * the node listener, where the CA file and its own certificate are), which
 * a comment at the top names. `nodesTls`: the edge's tls.nodes, if any.
 */
export function renderAgentConfig(node: NodeConfig, edgeAddress: string, nodesTls?: NodeTlsConfig): string {
  const providers = node.providers.map((p) => {
    const baseUrl = p.baseUrl ?? DEFAULT_BASE_URLS[p.type];
    const rendered: Record<string, unknown> = baseUrl === undefined ? { id: p.id, type: p.type } : { id: p.id, type: p.type, base_url: baseUrl };
    // What the agent announces wins on the edge: an agent left at its type's defaults would narrow (or widen) the catalog's list.
    if (p.endpoints !== undefined && !sameEndpoints(p.endpoints, defaultEndpoints(p.type))) rendered.endpoints = [...p.endpoints];
    return rendered;
  });
  const body = toYaml({ edge: { address: edgeAddress }, node: { id: node.id, token: node.token }, providers });
  // The edge's catalog has no command for a cli provider: the file cannot run until the operator adds it.
  const cli = node.providers.filter((p) => p.type === 'cli').map((p) => p.id);
  let todo = cli.length === 0 ? '' : `# Before running: add \`command\` (the argv of the agent to run) to the cli provider${cli.length > 1 ? 's' : ''} ${cli.join(', ')}; the edge does not know it.\n`;
  // The edge takes a catalog node with no provider (one to fill in later), the agent no config with none: say so, not a bare refusal.
  if (node.providers.length === 0) todo += `# Before running: the edge's catalog lists no provider for node ${node.id}, and the agent refuses a config with none. Add this node's providers to its nodes[].providers on the edge, apply that, and bootstrap again.\n`;
  // Plaintext against a TLS listener fails in the handshake with nothing to say why: say it here.
  if (nodesTls !== undefined) {
    todo += `# Before running: the edge's node listener speaks TLS. Add under edge: tls: { ca_file: <the CA that signed the edge's certificate>${nodesTls.requireClientCert ? ', cert_file: <this node\'s client certificate>, key_file: <its key>' : ''} }${nodesTls.requireClientCert ? ' (the edge requires a client certificate)' : ''}.\n`;
  }
  return `# Rendered by the edge's bootstrap listener for node ${node.id}. Holds the node token: keep it private.\n${todo}${body}`;
}

function sameEndpoints(a: readonly Endpoint[], b: readonly Endpoint[]): boolean {
  return endpointMask(a) === endpointMask(b);
}

export function nodeOf(config: EdgeConfig, nodeId: string): NodeConfig | undefined {
  return config.nodes.find((n) => n.id === nodeId);
}

export function sumsFile(entries: readonly (readonly [name: string, sha256: string])[]): string {
  return entries.map(([name, sha]) => `${sha}  ${name}\n`).join('');
}
