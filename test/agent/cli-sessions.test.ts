// A cli provider's session directories: always one segment directly under
// cwd_root, created on first use, reported as existing on later turns; an id
// that could climb out (or name something odd) is hashed, and a symlink
// planted where a session directory would be is refused, never followed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, readdir, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { CliSessions, type SessionWaiter } from '../../src/agent/cli-sessions.js';

let base: string;
let root: string;

before(async () => {
  base = await mkdtemp(join(tmpdir(), 'cli-sessions-'));
  root = join(base, 'root');
});

after(async () => {
  await rm(base, { recursive: true, force: true });
});

test('a plain id is its directory under the root: created first, existing after', async () => {
  const sessions = new CliSessions(root);
  assert.deepEqual(await sessions.directory('conv-1'), { dir: join(root, 'conv-1'), existed: false });
  assert.deepEqual(await sessions.directory('conv-1'), { dir: join(root, 'conv-1'), existed: true });
});

test('ids that could leave the root are hashed into one segment under it', async () => {
  const sessions = new CliSessions(root);
  for (const id of ['../escape', '..', '.', 'a/b', '/etc', 'x/../../y', '.hidden', 'sp ace']) {
    const { dir } = await sessions.directory(id);
    assert.equal(dirname(dir), root, `${JSON.stringify(id)} -> ${dir}`);
    assert.match(dir.slice(root.length + 1), /^s-[0-9a-f]{32}$/);
  }
  assert.notEqual((await sessions.directory('../a')).dir, (await sessions.directory('../b')).dir);
});

test('an id shaped like a hashed name does not get the directory of the session it hashes from', async () => {
  // Sessions are serialised by id: two ids sharing a directory could run in it at once.
  const sessions = new CliSessions(root);
  const hashed = (await sessions.directory('a b')).dir;
  const lookalike = hashed.slice(root.length + 1);
  assert.match(lookalike, /^s-[0-9a-f]{32}$/);
  const { dir } = await sessions.directory(lookalike);
  assert.notEqual(dir, hashed);
  assert.equal(dirname(dir), root);
});

test('a symlink where a session directory would be is refused', async () => {
  const sessions = new CliSessions(root);
  const outside = join(base, 'outside');
  await mkdir(outside, { recursive: true });
  await mkdir(root, { recursive: true });
  await symlink(outside, join(root, 'planted'));
  await assert.rejects(sessions.directory('planted'), /not a directory \(a symlink is never followed\)/);
});

test('one run per session at a time: the next waiter runs when the first leaves, in order; a withdrawn one never does', () => {
  const sessions = new CliSessions(root);
  const order: string[] = [];
  const waiter = (name: string): SessionWaiter => ({ sessionGranted: () => order.push(name) });
  const [b, c, d] = [waiter('b'), waiter('c'), waiter('d')];
  assert.equal(sessions.enter('s', waiter('a')), true);
  assert.equal(sessions.enter('s', b), false);
  assert.equal(sessions.enter('s', c), false);
  assert.equal(sessions.enter('s', d), false);
  assert.equal(sessions.enter('other', waiter('x')), true, 'another session is not held');
  sessions.withdraw('s', c);
  sessions.leave('s');
  sessions.leave('s');
  assert.deepEqual(order, ['b', 'd']);
  sessions.leave('s');
  assert.equal(sessions.busy('s'), 0);
});

test('a root reachable by other users is refused: the root writable by them, or a directory on its path they own', async (t) => {
  const open = join(base, 'open');
  await mkdir(open);
  await chmod(open, 0o777);
  await assert.rejects(new CliSessions(open).directory('s'), /open is writable by other users \(mode 777\)/);
  // A writable parent (a container's 0777 emptyDir /tmp) is accepted: the root made under it is the agent's, mode 700.
  assert.equal((await new CliSessions(join(open, 'root')).directory('s')).existed, false);

  if (process.getuid?.() !== 0) {
    t.diagnostic('not root: cannot give a directory to another user here');
    return;
  }
  // Another user made the directory first (as /tmp/edge-cli-sessions could be): refused.
  const theirs = join(base, 'theirs');
  await mkdir(theirs, { mode: 0o755 });
  await chown(theirs, 65534, 65534);
  await assert.rejects(new CliSessions(join(theirs, 'root')).directory('s'), /theirs belongs to uid 65534/);
});

test('a root that is a symlink to a private directory is used by its real path', async () => {
  const real = join(base, 'real-root');
  await mkdir(real, { mode: 0o700 });
  const link = join(base, 'link-root');
  await symlink(real, link);
  assert.deepEqual(await new CliSessions(link).directory('via-link'), { dir: join(real, 'via-link'), existed: false });
});

test('session_ttl_ms: a directory no run used for the TTL is removed, unless its session runs or waits now; a later turn starts afresh', async () => {
  const ttlRoot = join(base, 'ttl');
  const TTL = 60_000;
  const sessions = new CliSessions(ttlRoot, TTL);
  try {
    const old = new Date(Date.now() - 2 * TTL);
    for (const id of ['idle', 'busy', 'fresh', '../odd id']) await sessions.directory(id);
    const hashed = (await sessions.directory('../odd id')).dir;
    for (const id of ['idle', 'busy']) await utimes(join(ttlRoot, id), old, old);
    await utimes(hashed, old, old);
    // Not a session's: never touched, whatever its age.
    await writeFile(join(ttlRoot, 'operator-notes.txt'), 'keep');
    await utimes(join(ttlRoot, 'operator-notes.txt'), old, old);
    const waiter: SessionWaiter = { sessionGranted() {} };
    assert.equal(sessions.enter('busy', waiter), true);
    assert.equal(await sessions.sweep(Date.now()), 2, 'idle and the hashed one');
    assert.deepEqual((await readdir(ttlRoot)).sort(), ['busy', 'fresh', 'operator-notes.txt']);
    // A turn touches its directory: used now, it is kept another TTL.
    sessions.leave('busy');
    await sessions.directory('busy');
    assert.equal(await sessions.sweep(Date.now()), 0);
    assert.equal(await sessions.sweep(Date.now() + 2 * TTL), 2, 'busy and fresh, once idle long enough');
    assert.deepEqual(await sessions.directory('idle'), { dir: join(ttlRoot, 'idle'), existed: false }, 'a removed session starts afresh (args, not resume_args)');
  } finally {
    sessions.close();
  }
});

test('session_ttl_ms 0 keeps every directory', async () => {
  const keepRoot = join(base, 'keep');
  const sessions = new CliSessions(keepRoot, 0);
  await sessions.directory('forever');
  const old = new Date(0);
  await utimes(join(keepRoot, 'forever'), old, old);
  assert.equal(await sessions.sweep(Date.now()), 0);
  assert.deepEqual(await readdir(keepRoot), ['forever']);
});

test('the sweep runs by itself every quarter of the TTL (at least 1 s)', async () => {
  const timedRoot = join(base, 'timed');
  const sessions = new CliSessions(timedRoot, 1_000);
  try {
    await sessions.directory('soon-gone');
    const old = new Date(Date.now() - 5_000);
    await utimes(join(timedRoot, 'soon-gone'), old, old);
    const deadline = Date.now() + 5_000;
    while ((await readdir(timedRoot)).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(await readdir(timedRoot), []);
  } finally {
    sessions.close();
  }
});

test('a run longer than the TTL keeps its directory: its end counts as its last use', async () => {
  const longRoot = join(base, 'long');
  const TTL = 60_000;
  const sessions = new CliSessions(longRoot, TTL);
  try {
    await sessions.directory('long-run');
    assert.equal(sessions.enter('long-run', { sessionGranted() {} }), true);
    // The run began two TTLs ago and is still running: kept.
    const old = new Date(Date.now() - 2 * TTL);
    await utimes(join(longRoot, 'long-run'), old, old);
    assert.equal(await sessions.sweep(Date.now()), 0);
    sessions.leave('long-run');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(await sessions.sweep(Date.now()), 0, 'used until now: kept another TTL');
    assert.deepEqual(await readdir(longRoot), ['long-run']);
  } finally {
    sessions.close();
  }
});

test('a directory the sweep cannot remove is reported, and the others still go', async (t) => {
  const stuckRoot = join(base, 'stuck');
  const failures: string[] = [];
  const sessions = new CliSessions(stuckRoot, 60_000, (name) => failures.push(name));
  const locked = join(stuckRoot, 'a-stuck', 'locked');
  const root = process.getuid?.() === 0;
  try {
    for (const id of ['a-stuck', 'b-gone', 'c-gone']) await sessions.directory(id);
    // A file rm cannot take: in a directory the agent may not write, or (as root, who may) an immutable one.
    await mkdir(locked);
    await writeFile(join(locked, 'f'), 'x');
    if (root) {
      if (spawnSync('chattr', ['+i', join(locked, 'f')]).status !== 0) {
        t.skip('root removes anything, and chattr +i is not available here');
        return;
      }
    } else await chmod(locked, 0o500);
    const old = new Date(Date.now() - 120_000);
    for (const id of ['a-stuck', 'b-gone', 'c-gone']) await utimes(join(stuckRoot, id), old, old);
    assert.equal(await sessions.sweep(Date.now()), 2);
    assert.deepEqual(failures, ['a-stuck']);
    assert.deepEqual(await readdir(stuckRoot), ['a-stuck']);
  } finally {
    sessions.close();
    if (root) spawnSync('chattr', ['-i', join(locked, 'f')]);
    else await chmod(locked, 0o700).catch(() => {});
  }
});
