// The keys a config parser accepts, read from its own "unknown key (known: …)"
// problems for a config with a stray `zz` key in each section: the docs tests
// compare them with what the README and docs/operations.md say.
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/shared/config-reader.js';

export type Parse = (raw: unknown, source: string) => unknown;

/** Every key the parser knows, as `a.b<list>.c` (`list` stands for any list index); `root` is how the parser names the top level. */
export function acceptedKeys(parse: Parse, raw: unknown, root: string, list = '[]'): Set<string> {
  const keys = new Set<string>();
  try {
    parse(raw, 'probe');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    for (const problem of err.problems) {
      const m = /^(.*)\.zz: unknown key \(known: (.*)\)$/.exec(problem);
      if (!m) continue;
      const base = m[1] === root ? '' : m[1].replace(/\[\d+\]/g, list);
      for (const k of m[2].split(', ')) keys.add(base === '' ? k : `${base}.${k}`);
    }
  }
  return keys;
}
