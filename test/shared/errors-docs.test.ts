// The README's error table against the catalogue (src/shared/errors.ts):
// every code a client can get is in the table under its status, the table
// names no other; and wherever the docs write "<status> `<code>`" for a
// client error, that is the status and the code the client gets.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Errors, specForNodeErrorCode } from '../../src/shared/errors.js';
import { providerErrorSpec } from '../../src/workers/tunnel/provider-error.js';

const root = new URL('../../../', import.meta.url);
const README = readFileSync(new URL('README.md', root), 'utf8');
const DOCS = [README, ...readdirSync(new URL('docs/', root)).filter((f) => f.endsWith('.md')).map((f) => readFileSync(new URL(`docs/${f}`, root), 'utf8'))];

/** Answered by the HTTP parser beside the catalogue (README: "the HTTP parser's 408, 414 and 431"). */
const PARSER_ERRORS: ReadonlyMap<string, number> = new Map([['request_timeout', 408], ['uri_too_long', 414]]);
/** Codes an agent sends in its ERROR frames that reach a client under another code (specForNodeErrorCode). */
const NODE_ONLY_CODES = ['cli_bad_request', 'unknown_provider', 'adapter_not_supported', 'node_leaving'];

function catalogue(): Map<string, Set<number>> {
  const out = new Map<string, Set<number>>();
  for (const spec of Object.values(Errors)) {
    const statuses = out.get(spec.code) ?? new Set<number>();
    statuses.add(spec.status);
    out.set(spec.code, statuses);
  }
  for (const [code, status] of PARSER_ERRORS) out.set(code, new Set([status]));
  return out;
}

test('the README error table lists every code of the catalogue under its status, and no other', () => {
  const start = README.indexOf('\n## Errors\n');
  const lines = README.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('| status | code | when |'));
  const table = new Map<string, Set<number>>();
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    const [status, codes] = line.slice(1).split('|').map((c) => c.trim());
    for (const m of codes.matchAll(/`([a-z_]+)`/g)) {
      const statuses = table.get(m[1]) ?? new Set<number>();
      statuses.add(Number(status));
      table.set(m[1], statuses);
    }
  }
  const sorted = (m: Map<string, Set<number>>): [string, number[]][] => [...m].map(([c, s]): [string, number[]] => [c, [...s].sort()]).sort(([a], [b]) => a.localeCompare(b));
  assert.deepEqual(sorted(table), sorted(catalogue()));
});

test('"<status> `<code>`" in README.md and docs/ names a status and code a client gets', () => {
  const codes = catalogue();
  for (const code of NODE_ONLY_CODES) assert.notEqual(specForNodeErrorCode(code).code, code, `${code} reaches clients as itself`);
  const wrong: string[] = [];
  for (const text of DOCS) {
    for (const m of text.matchAll(/\b([1-5]\d\d) `([a-z_]+)`/g)) {
      const [mention, status, code] = m;
      if (NODE_ONLY_CODES.includes(code)) wrong.push(`${mention}: the client gets ${specForNodeErrorCode(code).status} \`${specForNodeErrorCode(code).code}\``);
      else if (codes.has(code) && !codes.get(code)?.has(Number(status))) wrong.push(`${mention}: ${code} is ${[...(codes.get(code) ?? [])].join(', ')}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test("the README says how a provider's error that is not JSON reaches the client: its status, upstream_error, a type by status", () => {
  const errors = README.slice(README.indexOf('\n## Errors\n'));
  // The table's 502 row names upstream_error too; this is the paragraph for the provider's own statuses.
  const paragraph = errors.split('\n\n').find((p) => !p.startsWith('|') && p.includes('`upstream_error`') && p.includes("keeps the provider's status"));
  assert.ok(paragraph !== undefined, 'no paragraph says a non-JSON provider error keeps its status under upstream_error');
  for (const status of [400, 401, 403, 404, 429, 500, 503]) {
    const { code, type } = providerErrorSpec(status);
    assert.equal(code, 'upstream_error');
    assert.ok(paragraph.includes(`\`${type}\``), `HTTP ${status} is answered as ${type}, which the paragraph does not name`);
  }
});
