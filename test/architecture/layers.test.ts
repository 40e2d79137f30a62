// The layer rule of docs/architecture.md, checked on the sources: every
// relative import in src/ (static, re-export and dynamic) must go to a layer
// its own layer may use, and no two files may import each other, directly
// or through others. A worker started by file URL is not an import.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../../src/', import.meta.url));

/** Layer -> the layers it may import ('*': anything; the tools on top). Its own layer is always allowed. */
export const LAYERS: Readonly<Record<string, readonly string[] | '*'>> = {
  gen: [],
  shared: ['gen'],
  contract: ['shared', 'gen'],
  main: ['contract', 'shared', 'gen'],
  workers: ['contract', 'shared', 'gen'],
  edge: ['main', 'workers', 'contract', 'shared', 'gen'],
  agent: ['shared', 'gen'],
  mock: '*',
  demo: '*',
};
/** Nothing below the tools may import them. */
const TOOLS = new Set(['mock', 'demo']);

const IMPORT = /(?:^|[\n;])\s*(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|(?:^|[\n;])\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

export interface ImportEdge {
  readonly from: string;
  readonly to: string;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sources(path));
    else if (entry.name.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** Every relative import in the tree under `root`, as paths relative to it. */
export function importsOf(root: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of sources(root)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3];
      if (spec === undefined || !spec.startsWith('.')) continue;
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      edges.push({ from: relative(root, file), to: relative(root, target) });
    }
  }
  return edges;
}

function layerOf(path: string): string {
  return path.split(sep)[0];
}

/** The imports that break the layer table. */
export function forbidden(edges: readonly ImportEdge[]): string[] {
  const out: string[] = [];
  for (const { from, to } of edges) {
    const a = layerOf(from);
    const b = layerOf(to);
    if (a === b) continue;
    const allowed = LAYERS[a];
    const ok = allowed === '*' || (allowed !== undefined && allowed.includes(b) && !TOOLS.has(b));
    if (!ok) out.push(`${from} imports ${to}: ${a}/ may import ${allowed === undefined ? 'nothing (not in the layer table)' : allowed.length === 0 ? 'nothing in src' : allowed.join(', ')}`);
  }
  return out;
}

/** Strongly connected groups of more than one file (Tarjan), i.e. the import cycles. */
export function cycles(edges: readonly ImportEdge[]): string[][] {
  const graph = new Map<string, string[]>();
  for (const { from, to } of edges) {
    if (!graph.has(to)) graph.set(to, []);
    const list = graph.get(from);
    if (list === undefined) graph.set(from, [to]);
    else list.push(to);
  }
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) found.push(group.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('every import in src/ follows the layer table (gen → shared → contract → main | workers → edge; agent on shared and gen)', () => {
  const edges = importsOf(SRC);
  assert.ok(edges.length > 200, `read the imports of src/ (${edges.length})`);
  assert.deepEqual(forbidden(edges), []);
});

test('src/ has no import cycles', () => {
  assert.deepEqual(cycles(importsOf(SRC)), []);
});

test('the rule itself catches a forbidden import, a tool imported from below, and a cycle', () => {
  assert.deepEqual(forbidden([{ from: join('workers', 'a.ts'), to: join('main', 'b.ts') }]).length, 1);
  assert.deepEqual(forbidden([{ from: join('main', 'a.ts'), to: join('workers', 'b.ts') }]).length, 1);
  assert.deepEqual(forbidden([{ from: join('agent', 'a.ts'), to: join('contract', 'b.ts') }]).length, 1);
  assert.deepEqual(forbidden([{ from: join('edge', 'a.ts'), to: join('mock', 'b.ts') }]).length, 1);
  assert.deepEqual(forbidden([{ from: join('demo', 'a.ts'), to: join('mock', 'b.ts') }]), []);
  assert.deepEqual(forbidden([{ from: join('edge', 'a.ts'), to: join('workers', 'b.ts') }]), []);
  assert.deepEqual(cycles([{ from: 'a.ts', to: 'b.ts' }, { from: 'b.ts', to: 'c.ts' }, { from: 'c.ts', to: 'a.ts' }]), [['a.ts', 'b.ts', 'c.ts']]);
  assert.deepEqual(cycles([{ from: 'a.ts', to: 'b.ts' }, { from: 'b.ts', to: 'c.ts' }]), []);
});

test('the I/O worker is started by file URL, not imported', () => {
  const edges = importsOf(SRC);
  assert.deepEqual(edges.filter((e) => e.to.endsWith(join('workers', 'io-worker.ts'))), []);
  assert.match(readFileSync(join(SRC, 'main', 'worker-pool.ts'), 'utf8'), /new URL\('\.\.\/workers\/io-worker\.js', import\.meta\.url\)/);
});
