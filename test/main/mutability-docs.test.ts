// What the docs say a config refresh can change on a running edge against
// src/main/refresh/mutability.ts: the table in docs/operations.md ("What a
// running edge can take") and the README's list of what needs a restart,
// checked for every key the edge's parser accepts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parseEdgeConfig } from '../../src/main/config.js';
import { isMutable } from '../../src/main/refresh/mutability.js';
import { acceptedKeys } from '../helpers/config-keys.js';

const read = (path: string): string => readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8');

/** Every key the edge's parser accepts, as a refresh names it (`nodes[x].providers[x].capacity`). */
function edgeKeys(): string[] {
  const z = { zz: 1 };
  const probe = {
    zz: 1, listen: { zz: 1, http: z, grpc: z }, limits: z, heartbeat: z, scheduler: z, workers: z, admin: z, drain: z, runs: z, runtime: z,
    nodes: [{ zz: 1, providers: [z] }], models: [z], auth: { zz: 1, api_keys: [z] }, tls: { zz: 1, client: z, nodes: z },
    bootstrap: { zz: 1, listen: z }, a2a: { zz: 1, agents: [{ zz: 1, skills: [z] }] }, resilience: { zz: 1, outliers: z, overload: z }, cors: z,
  };
  const keys = [...acceptedKeys(parseEdgeConfig, probe, '(root)', '[x]')];
  assert.ok(keys.length > 50, 'the probe read the parser\'s keys');
  // Leaves only: a section is judged by its keys.
  return keys.filter((k) => !keys.some((other) => other.startsWith(`${k}.`) || other.startsWith(`${k}[x].`)));
}

/** A documented path as a pattern: `*` and `…` any rest, `[id]` any entry; else the key itself. */
function pattern(path: string): RegExp {
  const source = path.replace(/[.+?^${}()|\\]/g, '\\$&').replace(/\[[a-z]+\]/g, '\\[[^\\]]*\\]').replace(/\*|…/g, '.*');
  return new RegExp(`^${source}$`);
}

test('docs/operations.md: the first row that names a key says whether a refresh can change it, as the edge decides', () => {
  const text = read('docs/operations.md');
  const table = text.slice(text.indexOf('### What a running edge can take'));
  const rows: { patterns: RegExp[]; mutable: boolean; line: string }[] = [];
  for (const line of table.split('\n').slice(1)) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells[2] !== 'mutable' && cells[2] !== 'restart') {
      if (rows.length > 0 && !line.startsWith('|')) break;
      continue;
    }
    // Only paths: `capacity` and the like in a row's notes are its fields, not keys.
    const paths = [...cells[1].matchAll(/`([^`]+)`/g)].map((m) => m[1]).filter((p) => /[.[]/.test(p));
    rows.push({ patterns: paths.map(pattern), mutable: cells[2] === 'mutable', line: cells[1] });
  }
  assert.ok(rows.length > 20, 'the table was read');
  for (const key of edgeKeys()) {
    const row = rows.find((r) => r.patterns.some((p) => p.test(key)));
    // A key no row names is restart-required, as the table says.
    assert.equal(isMutable(key), row?.mutable ?? false, `${key}: docs/operations.md says ${row === undefined ? 'restart (no row)' : `${row.mutable ? 'mutable' : 'restart'} (${row.line})`}`);
  }
});

test('README: the keys it says need a restart are the ones a refresh refuses, and its exceptions are the ones it takes', () => {
  const text = read('README.md');
  const start = text.indexOf('Most keys can be changed on a running edge');
  const sentence = text.slice(start, text.indexOf('need a restart', start));
  const named = [...sentence.matchAll(/`([a-z_.*]+)`/g)].map((m) => m[1]).filter((p) => p.includes('.'));
  const sections = named.filter((p) => p.endsWith('.*')).map((p) => p.slice(0, -1));
  // A key named inside a listed section is an exception to it; one outside any is itself restart-required.
  const exceptions = new Set(named.filter((p) => !p.endsWith('.*') && sections.some((s) => p.startsWith(s))));
  const single = named.filter((p) => !p.endsWith('.*') && !exceptions.has(p));
  assert.ok(sections.length >= 5, 'the sentence was read');
  for (const key of edgeKeys()) {
    if (exceptions.has(key)) assert.equal(isMutable(key), true, `README names ${key} as an exception a refresh takes`);
    else if (sections.some((s) => key.startsWith(s)) || single.includes(key)) assert.equal(isMutable(key), false, `README says ${key} needs a restart`);
  }
});
