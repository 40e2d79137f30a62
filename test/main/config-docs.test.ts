// The README's configuration tables (edge, node agent, cli providers) against
// the parsers: every key a parser accepts is in a table, every key a table
// names is accepted, and a default the table writes as a literal is the one
// the parser fills in (setting it explicitly changes nothing).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parseAgentConfig } from '../../src/agent/config.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { acceptedKeys, type Parse } from '../helpers/config-keys.js';

const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

interface Row {
  readonly keys: string[];
  readonly defaults: string;
}

const EDGE_BASE = {
  nodes: [{ id: 'n', token: 'a-long-enough-node-token', providers: [{ id: 'p' }] }],
  models: [{ alias: 'm', providers: { p: 's' } }],
  auth: { api_keys: [{ name: 'k', key_sha256: 'a'.repeat(64) }] },
  a2a: { agents: [{ id: 'a', model: 'm' }] },
};
const AGENT_BASE = { edge: { address: '127.0.0.1:50051' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'openai_compat', base_url: 'http://127.0.0.1:9000' }] };
const CLI_BASE = { ...AGENT_BASE, providers: [{ id: 'c', type: 'cli', command: ['/bin/true'] }] };

// A literal default the parser does not fill in as such, and why.
const NOT_LITERAL = new Map([
  // Setting a key's priority or weight turns fair queuing on (scheduler.fairness's default): the same value, another policy.
  ['auth.api_keys[].priority', 'turns fairness on'],
  ['auth.api_keys[].weight', 'turns fairness on'],
  ['auth.api_keys[].fairness_header', 'kept only when configured'],
]);

/** The rows of the `| key | default | meaning |` table under a README heading. */
function tableUnder(heading: string): Row[] {
  const start = README.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `README has no heading ${heading}`);
  const lines = README.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('| key | default |'));
  const rows: Row[] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    const [keyCell, defaults] = line.slice(1).split(/(?<!\\)\|/).map((c) => c.trim());
    rows.push({ keys: [...keyCell.matchAll(/`([^`]+)`/g)].map((m) => m[1]), defaults });
  }
  assert.ok(rows.length > 0, `no table under ${heading}`);
  return rows;
}

/** A row's keys in full: `.x` names a sibling of the row's first key or of one of its parents, whichever the parser knows. */
function fullKeys(row: Row, accepted: ReadonlySet<string>, prefix = ''): string[] {
  const first = prefix + row.keys[0];
  return row.keys.map((k, i) => {
    if (i === 0 || !k.startsWith('.')) return (prefix + k).replace(/\[\]$/, '');
    const parts = first.split('.');
    for (let cut = parts.length - 1; cut >= 1; cut--) {
      const candidate = `${parts.slice(0, cut).join('.')}${k}`;
      if (accepted.has(candidate)) return candidate;
    }
    return `${parts.slice(0, -1).join('.')}${k}`;
  });
}

function covers(documented: ReadonlySet<string>, key: string): boolean {
  if (documented.has(key)) return true;
  for (const d of documented) {
    // A documented list or section covers what its meaning lists (a2a.agents[]: id, model, ...); a section is covered by its keys.
    if (key.startsWith(`${d}.`) || key.startsWith(`${d}[].`) || d.startsWith(`${key}.`) || d.startsWith(`${key}[].`)) return true;
  }
  return false;
}

function withKey(base: unknown, path: string, value: unknown): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  let node: Record<string, unknown> = copy;
  const parts = path.split('.');
  parts.forEach((part, i) => {
    const list = part.endsWith('[]');
    const name = list ? part.slice(0, -2) : part;
    if (i === parts.length - 1) node[name] = value;
    else if (list) node = (node[name] as Record<string, unknown>[])[0];
    else node = (node[name] ??= {}) as Record<string, unknown>;
  });
  return copy;
}

/** Literal defaults of a row, one per key, or undefined when the cell is prose ("none", "by type", ...). */
function literalDefaults(row: Row, names: ReadonlySet<string>): unknown[] | undefined {
  const parts = row.defaults.split(' / ');
  if (parts.length !== row.keys.length) return undefined;
  const values: unknown[] = [];
  for (const part of parts) {
    const m = /^`([^`<]+)`(?: \([^`]*\))?$/.exec(part);
    if (!m) return undefined;
    const value: unknown = parseYaml(m[1]);
    // `args` as resume_args's default names another key, not a value.
    if (typeof value === 'string' && names.has(value)) return undefined;
    values.push(value);
  }
  return values;
}

function checkTables(parse: Parse, probe: unknown, root: string, tables: { rows: Row[]; prefix: string; base: unknown }[]): void {
  const accepted = acceptedKeys(parse, probe, root);
  assert.ok(accepted.size > 10, 'the probe read the parser\'s keys');
  const documented = new Set<string>();
  for (const { rows, prefix, base } of tables) {
    const names = new Set(rows.flatMap((r) => r.keys));
    for (const row of rows) {
      const keys = fullKeys(row, accepted, prefix);
      for (const key of keys) {
        documented.add(key);
        assert.ok(accepted.has(key), `README documents ${key}, which the parser refuses`);
      }
      const defaults = literalDefaults(row, names);
      if (defaults === undefined) continue;
      keys.forEach((key, i) => {
        if (NOT_LITERAL.has(key)) return;
        assert.deepEqual(parse(withKey(base, key, defaults[i]), 'explicit'), parse(base, 'explicit'), `README gives ${key} the default ${JSON.stringify(defaults[i])}; the parser fills in another`);
      });
    }
  }
  const missing = [...accepted].filter((k) => !covers(documented, k));
  assert.deepEqual(missing, [], 'keys the parser accepts that no README table documents');
}

test('the README edge config table: its keys are the parser\'s, and its literal defaults are the ones filled in', () => {
  const z = { zz: 1 };
  const probe = {
    zz: 1, listen: { zz: 1, http: z, grpc: z }, limits: z, heartbeat: z, scheduler: z, workers: z, admin: z, drain: z, runs: z, runtime: z,
    nodes: [{ zz: 1, providers: [z] }], models: [z], auth: { zz: 1, api_keys: [z] }, tls: { zz: 1, client: z, nodes: z },
    bootstrap: { zz: 1, listen: z }, a2a: { zz: 1, agents: [{ zz: 1, skills: [z] }] }, resilience: { zz: 1, outliers: z, overload: z }, cors: z,
  };
  checkTables(parseEdgeConfig, probe, '(root)', [{ rows: tableUnder('### Edge (`examples/edge.yaml`)'), prefix: '', base: EDGE_BASE }]);
});

test('the README node agent and cli provider tables: their keys are the parser\'s, and their literal defaults are the ones filled in', () => {
  const z = { zz: 1 };
  const probe = { zz: 1, edge: { zz: 1, tls: z }, node: z, providers: [z, { zz: 1, type: 'cli' }], reconnect: z, tunnels: z, health: z, runtime: z };
  checkTables(parseAgentConfig, probe, 'config', [
    { rows: tableUnder('### Node agent (`examples/node-agent.yaml`)'), prefix: '', base: AGENT_BASE },
    { rows: tableUnder('### cli providers (`type: cli`)'), prefix: 'providers[].', base: CLI_BASE },
  ]);
});
