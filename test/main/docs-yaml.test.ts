// Every ```yaml example in README.md and docs/*.md against the config
// parsers: an example is a fragment, so it is laid over a minimal valid
// config (the edge's, or the agent's when it has an `edge:` section) with its
// placeholders (`…`, `<…>`) filled in, and the parser must find no problem.
// A key renamed or a range narrowed in the code fails here, not in an
// operator's first start.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parseAgentConfig } from '../../src/agent/config.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { ConfigError } from '../../src/shared/config-reader.js';

const root = new URL('../../../', import.meta.url);
const FILES = ['README.md', ...readdirSync(new URL('docs/', root)).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

const EDGE_BASE = {
  nodes: [{ id: 'gpu-1', token: 'a-long-enough-node-token-1', providers: [{ id: 'gpu-1-vllm' }] }],
  models: [{ alias: 'llama3', providers: { 'gpu-1-vllm': 'llama-3-8b' } }, { alias: 'agent', providers: { 'gpu-1-vllm': 'llama-3-8b' } }],
};
const AGENT_BASE = { node: { id: 'gpu-1', token: 'a-long-enough-node-token-1' }, providers: [{ id: 'gpu-1-vllm', type: 'vllm', base_url: 'http://127.0.0.1:8000' }] };

/** A placeholder the docs write for a value the reader supplies: a digest, a token. */
function fill(value: unknown, key: string, n: { i: number }): unknown {
  if (Array.isArray(value)) return value.map((v) => fill(v, key, n));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, k, n)]));
  if (typeof value !== 'string' || !/…|^<.*>$/.test(value)) return value;
  n.i++;
  return key === 'key_sha256' ? n.i.toString(16).padStart(64, '0') : `placeholder-secret-${n.i}-0123456789`;
}

function examples(): { where: string; raw: Record<string, unknown> }[] {
  const out: { where: string; raw: Record<string, unknown> }[] = [];
  for (const file of FILES) {
    const lines = readFileSync(new URL(file, root), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.trim() !== '```yaml' && line.trim() !== '```yml') return;
      const end = lines.findIndex((l, j) => j > i && l.trim().startsWith('```'));
      out.push({ where: `${file}:${i + 1}`, raw: parseYaml(lines.slice(i + 1, end).join('\n')) as Record<string, unknown> });
    });
  }
  return out;
}

test('every yaml example in README.md and docs/ is accepted by its parser', () => {
  const found = examples();
  assert.ok(found.length >= 5, `read the examples: ${found.map((e) => e.where).join(', ')}`);
  for (const { where, raw } of found) {
    const agent = 'edge' in raw;
    const filled = fill(raw, '', { i: 0 }) as Record<string, unknown>;
    const config: Record<string, unknown> = { ...(agent ? AGENT_BASE : EDGE_BASE), ...filled };
    // An example's own nodes: the base's aliases map to its first provider.
    if (!agent && filled.nodes !== undefined && filled.models === undefined) {
      const provider = (filled.nodes as { providers: { id: string }[] }[])[0].providers[0].id;
      config.models = EDGE_BASE.models.map((m) => ({ ...m, providers: { [provider]: 'served' } }));
    }
    try {
      if (agent) parseAgentConfig(config, where);
      else parseEdgeConfig(config, where);
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      assert.fail(`${where}: ${err.problems.join('; ')}`);
    }
  }
});
