// What a provider's base_url may be, checked alike by the node agent (its
// providers[].base_url) and by the edge (the catalog's base_url, rendered
// into bootstrapped agent configs).
import type { ConfigReader } from './config-reader.js';

/**
 * What a base_url cannot carry: tunnels keep only its origin and path, and
 * the probes append their path to the string, so credentials, a query or a
 * fragment would be dropped by one and mangled by the other; and a path
 * ending in /v1 (or an ollama one in /api) would be doubled, since each
 * request's own path is appended.
 */
export function baseUrlProblems(r: ConfigReader, path: string, value: string, type: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return; // r.url reported it
  }
  // Never echoed: the password is a secret.
  if (url.username !== '' || url.password !== '') r.problems.push(`${path}: must not hold credentials (user:password@); give the provider's key as api_key`);
  if (url.search !== '') r.problems.push(`${path}: must not have a query (?…): requests go to its path only`);
  if (url.hash !== '') r.problems.push(`${path}: must not have a fragment (#…)`);
  // Port 0 names no listener: every request and probe would fail as a refused connection.
  if (url.port === '0') r.problems.push(`${path}: port 0 is no port to connect to; give the provider's port (1 to 65535)`);
  // An OpenAI-style base URL (https://host/v1) would send every request to /v1/v1/...
  if (/\/v1\/*$/.test(url.pathname)) r.problems.push(`${path}: ends in /v1, but the agent appends each request's own path (/v1/chat/completions, …), so requests would go to ${url.pathname.replace(/\/+$/, '')}/v1/…; give the base without /v1 (e.g. ${url.origin})`);
  // Ollama's docs give its API as http://host:11434/api: the probe would GET /api/api/tags, requests /api/v1/….
  if (type === 'ollama' && /\/api\/*$/.test(url.pathname)) r.problems.push(`${path}: ends in /api, but the agent appends each request's own path (/v1/chat/completions, and /api/tags for its probe), so they would go to ${url.pathname.replace(/\/+$/, '')}/v1/…; give Ollama's base without /api (e.g. ${url.origin})`);
}
