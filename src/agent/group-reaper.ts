// Kills the cli runs' process groups when the agent dies without its chance
// to do so (SIGKILL, the OOM killer, a crash in native code). A run's command
// lives in its own process group (so a cancel reaches its grandchildren),
// which also means nothing kills it when its parent goes. The reaper is a
// small /bin/sh started on the first run, in a process group of its own (a
// kill of the agent's whole group, as `timeout -s KILL` or a supervisor's
// group kill sends, leaves it standing): the agent tells it on a pipe which
// groups are live (`+PGID GRACE_MS`, `-PGID`); when the pipe reaches end of
// file, however the agent ended, it sends SIGTERM to every group still
// listed, waits the longest kill_grace_ms among those that were still
// there, then SIGKILL, and exits. It ignores INT, TERM and HUP. On a
// graceful stop the agent has aborted its runs (SIGTERM) but exits without
// waiting out their kill grace: the reaper finishes those (SIGTERM again,
// harmless, then SIGKILL after the grace).
import { spawn, type ChildProcess } from 'node:child_process';
import type { Writable } from 'node:stream';

/** Where the reaper reports that it could not start or ended on its own. */
export type ReaperWarn = (message: string, detail: Record<string, unknown>) => void;

// Groups are kept as " PGID:GRACE " tokens. dash-compatible: `kill -SIG -PGID`
// signals a group (dash rejects `kill -s SIG -PGID`).
const SCRIPT = `trap '' INT TERM HUP PIPE
groups=' '
while IFS= read -r line; do
  case $line in
    +*) set -- \${line#+}; groups="$groups$1:$2 " ;;
    -*) id=\${line#-}; case $groups in *" $id:"*) rest=\${groups#* $id:}; groups="\${groups%% $id:*} \${rest#* }" ;; esac ;;
  esac
done
[ "$groups" = ' ' ] && exit 0
live=0
grace=0
for t in $groups; do
  kill -TERM -\${t%%:*} 2>/dev/null || continue
  live=1
  [ \${t#*:} -gt $grace ] && grace=\${t#*:}
done
[ $live = 1 ] && [ $grace -gt 0 ] && sleep $((grace / 1000)).$(printf %03d $((grace % 1000)))
for t in $groups; do kill -KILL -\${t%%:*} 2>/dev/null; done
exit 0
`;

/** A reaper that ended sooner than this after its start is not started again. */
const RESTART_AFTER_MS = 1_000;

export class GroupReaper {
  /** Live groups -> their kill grace (ms): written again to a reaper started anew. */
  readonly #groups = new Map<number, number>();
  readonly #warn: ReaperWarn;
  #child: ChildProcess | undefined;
  #stdin: Writable | undefined;
  /** /bin/sh could not be started: runs go on without the guard (warned once). */
  #unavailable = process.platform === 'win32';
  #closed = false;
  #startedAt = 0;

  constructor(warn: ReaperWarn) {
    this.#warn = warn;
  }

  /** The reaper's pid while one runs (tests). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** A run's group exists now: it is killed if this process dies before remove(). */
  add(pgid: number, graceMs: number): void {
    if (this.#closed) return;
    this.#groups.set(pgid, graceMs);
    if (this.#stdin === undefined) this.#start();
    else this.#stdin.write(`+${pgid} ${graceMs}\n`);
  }

  /** The group is gone (its run closed and sent the final SIGKILL): nothing to reap. */
  remove(pgid: number): void {
    if (!this.#groups.delete(pgid)) return;
    this.#stdin?.write(`-${pgid}\n`);
  }

  /** The agent stops: the reaper kills whatever is still listed and exits. */
  close(): void {
    this.#closed = true;
    this.#stdin?.end();
    this.#stdin = undefined;
  }

  #start(): void {
    if (this.#unavailable) return;
    let child: ChildProcess;
    try {
      // detached: its own process group (see the top of this file).
      child = spawn('/bin/sh', ['-c', SCRIPT], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    } catch (err) {
      this.#fail(err as Error);
      return;
    }
    const stdin = child.stdin;
    if (stdin === null) return;
    // The reaper must not keep the agent alive, nor its pipe errors crash it.
    child.unref();
    (stdin as Writable & { unref?: () => void }).unref?.();
    stdin.on('error', ignore);
    child.on('error', (err) => this.#fail(err));
    child.on('exit', (code, signal) => this.#exited(child, code, signal));
    this.#child = child;
    this.#stdin = stdin;
    this.#startedAt = Date.now();
    let lines = '';
    for (const [pgid, grace] of this.#groups) lines += `+${pgid} ${grace}\n`;
    if (lines !== '') stdin.write(lines);
  }

  #fail(err: Error): void {
    this.#child = undefined;
    this.#stdin = undefined;
    if (this.#unavailable) return;
    this.#unavailable = true;
    this.#warn('cli runs are not guarded against the agent being killed: the process-group reaper could not start', { err: err.message });
  }

  #exited(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#child !== child) return;
    this.#child = undefined;
    this.#stdin = undefined;
    if (this.#closed || this.#unavailable) return;
    if (Date.now() - this.#startedAt < RESTART_AFTER_MS) {
      // It cannot stay up: no restart loop.
      this.#fail(new Error(`it exited at once (code ${code}, signal ${signal})`));
      return;
    }
    // Killed from outside: a new one starts now (or with the next run), told every live group.
    this.#warn('the cli process-group reaper ended; starting a new one', { code, signal, liveGroups: this.#groups.size });
    if (this.#groups.size > 0) this.#start();
  }
}

function ignore(): void {}
