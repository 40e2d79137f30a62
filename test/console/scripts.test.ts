// npm test runs every console test file: test:files' first command finds the
// test files and leaves out, by pattern, those its second command runs alone
// (console.test.js among them). A pattern wider than its file dropped the
// other browser tests (console-runs, console-keys, console-routes) from npm
// test and CI without a word.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test("test:files runs each console test file once: found by its first command, or named by its second", () => {
  const script = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts['test:files'];
  const found = /\$\((find dist\/test [^)]*)\)/.exec(script);
  assert.ok(found, `no $(find dist/test …) in test:files: ${script}`);
  const listed = execFileSync('bash', ['-c', found[1]], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter((line) => line !== '');
  const named = script.slice(found.index + found[0].length).match(/dist\/test\/[\w/.-]+\.test\.js/g) ?? [];
  const consoleFiles = readdirSync(`${ROOT}dist/test/console`).filter((name) => name.endsWith('.test.js')).map((name) => `dist/test/console/${name}`);
  assert.ok(consoleFiles.includes('dist/test/console/console-runs.test.js'), consoleFiles.join(', '));
  for (const file of consoleFiles) {
    const runs = listed.filter((f) => f === file).length + named.filter((f) => f === file).length;
    assert.equal(runs, 1, `${file} is run ${runs} times by test:files`);
  }
});
