// Sessions of one cli provider on this node: each session has its own
// working directory directly under the provider's cwd_root (created on first
// use, never anywhere else), and runs one process at a time: a request for a
// session whose process is still running waits its turn, in order.
import { createHash } from 'node:crypto';
import { lstat, mkdir } from 'node:fs/promises';
import { resolve, sep } from 'node:path';

/** A request waiting for its session; told once it may run. */
export interface SessionWaiter {
  sessionGranted(): void;
}

/** Session ids that are safe as a directory name as they are; others are hashed. */
const PLAIN_SESSION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export class CliSessions {
  readonly #root: string;
  /** Sessions with a running process -> who waits for it, in arrival order. */
  readonly #running = new Map<string, SessionWaiter[]>();

  constructor(root: string) {
    this.#root = root;
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
    if (next === undefined) this.#running.delete(session);
    else next.sessionGranted();
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
    const dir = resolve(this.#root, name);
    if (!dir.startsWith(this.#root + sep)) throw new Error(`session directory ${dir} would be outside ${this.#root}`);
    await mkdir(this.#root, { recursive: true, mode: 0o700 });
    try {
      const stat = await lstat(dir);
      if (!stat.isDirectory()) throw new Error(`${dir} exists and is not a directory (a symlink is never followed)`);
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
