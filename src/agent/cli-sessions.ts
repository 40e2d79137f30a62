// Sessions of one cli provider on this node: each session has its own
// working directory directly under the provider's cwd_root (created on first
// use, never anywhere else), and runs one process at a time: a request for a
// session whose process is still running waits its turn, in order. A
// directory no run has used for session_ttl_ms is removed (its mtime is the
// last use: every run touches it), so sessions do not fill the disk.
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, realpath, rm, utimes } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';

/** A request waiting for its session; told once it may run. */
export interface SessionWaiter {
  sessionGranted(): void;
}

/** Session ids that are safe as a directory name as they are; others are hashed. */
const PLAIN_SESSION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export class CliSessions {
  /** As configured; #realRoot once checked (see #checkedRoot). */
  readonly #root: string;
  #realRoot: string | undefined;
  /** Sessions with a running process -> who waits for it, in arrival order. */
  readonly #running = new Map<string, SessionWaiter[]>();
  /** 0 = directories are kept for good. */
  readonly #ttlMs: number;
  /** Directory names being removed by a sweep: a run of that session waits for it, then starts afresh. */
  readonly #removing = new Map<string, Promise<void>>();
  #sweeper: NodeJS.Timeout | undefined;

  /** Told of a directory the sweep could not remove (logged by the agent); the sweep goes on. */
  readonly #onSweepError: ((name: string, err: Error) => void) | undefined;

  constructor(root: string, ttlMs = 0, onSweepError?: (name: string, err: Error) => void) {
    this.#root = root;
    this.#ttlMs = ttlMs;
    this.#onSweepError = onSweepError;
    if (ttlMs > 0) {
      // A quarter of the TTL (a directory lives at most 1.25 × it), between 1 s and 1 h.
      this.#sweeper = setInterval(() => void this.sweep(Date.now()).catch(() => {}), Math.min(3_600_000, Math.max(1_000, Math.floor(ttlMs / 4))));
      this.#sweeper.unref();
    }
  }

  close(): void {
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  /**
   * Removes the session directories no run used for the TTL (by mtime),
   * except those of sessions running or waiting now; returns how many went.
   * Only entries a session could own (a plain or hashed name, a real
   * directory) are touched: whatever else sits in the root is left alone.
   */
  async sweep(now: number): Promise<number> {
    if (this.#ttlMs <= 0) return 0;
    let root: string;
    try {
      root = this.#realRoot ?? (await this.#checkedRoot());
    } catch {
      return 0;
    }
    const active = new Set<string>();
    let removed = 0;
    for (const name of await readdir(root)) {
      if (!PLAIN_SESSION.test(name) || name.includes('..')) continue;
      const dir = resolve(root, name);
      const stat = await lstat(dir).catch(() => undefined);
      if (stat === undefined || !stat.isDirectory() || now - stat.mtimeMs < this.#ttlMs) continue;
      // Checked and marked in one turn: a run that enters after this waits for the removal (directory()).
      active.clear();
      for (const session of this.#running.keys()) active.add(directoryName(session));
      if (active.has(name) || this.#removing.has(name)) continue;
      const removal = rm(dir, { recursive: true, force: true });
      this.#removing.set(name, removal);
      try {
        await removal;
        removed++;
      } catch (err) {
        // One that cannot go (a file of another user's inside) must not stop the rest.
        this.#onSweepError?.(name, err as Error);
      } finally {
        this.#removing.delete(name);
      }
    }
    return removed;
  }

  /** True: the caller runs now (call leave() when its process is gone). False: it waits for sessionGranted(). */
  enter(session: string, waiter: SessionWaiter): boolean {
    const waiting = this.#running.get(session);
    if (waiting === undefined) {
      this.#running.set(session, []);
      return true;
    }
    waiting.push(waiter);
    return false;
  }

  /** A waiter that gave up (cancelled, or waited too long). */
  withdraw(session: string, waiter: SessionWaiter): void {
    const waiting = this.#running.get(session);
    const at = waiting?.indexOf(waiter) ?? -1;
    if (at >= 0) waiting?.splice(at, 1);
  }

  /** The session's process is gone: the next waiter, if any, runs. */
  leave(session: string): void {
    const waiting = this.#running.get(session);
    if (waiting === undefined) return;
    const next = waiting.shift();
    if (next !== undefined) {
      next.sessionGranted();
      return;
    }
    this.#running.delete(session);
    // Idle from now, not from when the run began: a run longer than the TTL keeps its directory another TTL.
    if (this.#ttlMs > 0 && this.#realRoot !== undefined) {
      const now = new Date();
      utimes(resolve(this.#realRoot, directoryName(session)), now, now).catch(() => {});
    }
  }

  /** Requests running or waiting, per session (tests, logs). */
  busy(session: string): number {
    const waiting = this.#running.get(session);
    return waiting === undefined ? 0 : 1 + waiting.length;
  }

  /**
   * The session's working directory, created when missing. `existed` tells a
   * later turn (resume_args) from the first. The name is confined to one
   * path segment under the root, and an existing symlink is refused: the
   * directory can never be outside the root.
   */
  async directory(session: string): Promise<{ dir: string; existed: boolean }> {
    const name = directoryName(session);
    const root = this.#realRoot ?? (await this.#checkedRoot());
    const dir = resolve(root, name);
    if (!dir.startsWith(root + sep)) throw new Error(`session directory ${dir} would be outside ${root}`);
    const removal = this.#removing.get(name);
    if (removal !== undefined) await removal.catch(() => {});
    try {
      const stat = await lstat(dir);
      if (!stat.isDirectory()) throw new Error(`${dir} exists and is not a directory (a symlink is never followed)`);
      // The directory's mtime is its last use: the sweep keeps it another TTL.
      if (this.#ttlMs > 0) {
        const now = new Date();
        await utimes(dir, now, now);
      }
      return { dir, existed: true };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    try {
      await mkdir(dir, { mode: 0o700 });
      return { dir, existed: false };
    } catch (err) {
      // Another run created it in between (no other session has this name: see directoryName).
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return { dir, existed: true };
      throw err;
    }
  }

  /**
   * The root, created when missing, as its real path, once no other user
   * can reach into it: every directory on that path belongs to this agent's
   * user or root, and the root itself is writable by no one else (its group
   * only when that is the agent's own group). The default root sits under
   * the shared temp directory, where another user could have made
   * `edge-cli-sessions` first, and would then read the transcripts or plant
   * files the CLI runs. (A writable parent such as a container's 0777
   * emptyDir /tmp is accepted: on a host shared with other users, give
   * cwd_root a private path.)
   */
  async #checkedRoot(): Promise<string> {
    await mkdir(this.#root, { recursive: true, mode: 0o700 });
    const root = await realpath(this.#root);
    const problem = await sessionRootProblem(root);
    if (problem !== undefined) throw new Error(problem);
    this.#realRoot = root;
    return root;
  }
}

/** What a hashed name looks like: a session id of this form is hashed too, so no id can take another's directory. */
const HASHED_NAME = /^s-[0-9a-f]{32}$/;

/**
 * The session's directory name: a plain id as it is; anything else (and an
 * id shaped like a hashed name) as `s-` and 32 hex digits of its SHA-256.
 * Sessions are serialised by id, so two ids must never share a directory.
 */
function directoryName(session: string): string {
  if (PLAIN_SESSION.test(session) && !session.includes('..') && !HASHED_NAME.test(session)) return session;
  return `s-${createHash('sha256').update(session).digest('hex').slice(0, 32)}`;
}

/**
 * Why another user could reach the sessions under `root`, or undefined (CliSessions at its first run,
 * check-config before it). `from`: root's real path, or its nearest existing directory's when root is
 * still to be made (this user then makes it, 0700): each directory from there up must be this user's
 * or root's, and root itself writable by no other user.
 */
export async function sessionRootProblem(root: string, from = root): Promise<string | undefined> {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  for (let path = from; ; path = dirname(path)) {
    const stat = await lstat(path);
    if (stat.uid !== uid && stat.uid !== 0) {
      return `${path} belongs to uid ${stat.uid}, not to this agent's user (${uid}) or root: another user could reach the sessions; set cwd_root to a directory of the agent's own`;
    }
    if (path === root && ((stat.mode & 0o002) !== 0 || ((stat.mode & 0o020) !== 0 && stat.gid !== process.getgid?.()))) {
      return `${path} is writable by other users (mode ${(stat.mode & 0o7777).toString(8)}): they could replace the sessions' directories; set cwd_root to a directory of the agent's own`;
    }
    if (dirname(path) === path) return undefined;
  }
}
