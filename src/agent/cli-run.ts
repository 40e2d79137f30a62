// One request to a `type: cli` provider: waits for its session's turn, runs
// the configured command in the session's directory (argv, never a shell;
// its own process group; only the allow-listed environment), and turns its
// stdout into the OpenAI answer: `chat.completion.chunk` events as the bytes
// arrive when streaming, one `chat.completion` at exit otherwise. It plays
// undici's DispatchController for the TunnelExecutor, so the cli answer goes
// through the same coalescing, flow control and framing as any tunnel; abort()
// (the edge cancelled, a deadline passed) kills the whole process group:
// SIGTERM, then SIGKILL after kill_grace_ms, so no grandchild survives.
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import type { Dispatcher } from 'undici';
import type { TunnelRequest } from '../gen/edge/v1/tunnel_pb.js';
import { childEnv, expandArgs, type CliProviderConfig } from './cli-config.js';
import { CliRequestError, extractPrompt } from './cli-prompt.js';
import type { CliSessions, SessionWaiter } from './cli-sessions.js';
import { MAX_ERROR_MESSAGE_CHARS } from '../shared/wire-limits.js';
import { AgentRunError } from './tunnel-errors.js';
import type { ResponseHeaders } from './upstream-headers.js';
import type { GroupReaper } from './group-reaper.js';

/** A cli provider as the executor runs it: its settings, its sessions, and the guard that outlives the agent. */
export interface CliProvider {
  readonly config: CliProviderConfig;
  readonly sessions: CliSessions;
  /** Kills the run's group should the agent die first; absent in unit tests that run no agent. */
  readonly reaper?: GroupReaper;
}

/** What receives the answer: the TunnelExecutor's undici handler methods. */
export interface CliRunHandler {
  onRequestStart(controller: Dispatcher.DispatchController): void;
  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void;
  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void;
  onResponseEnd(): void;
  onResponseError(controller: Dispatcher.DispatchController, err: Error): void;
}

/** The session a request without one belongs to (as the edge normalises it). */
export const DEFAULT_SESSION = 'default';
/** stderr kept for the error message and the logs: its last this many characters. */
const STDERR_TAIL_CHARS = 4_096;
const SSE_HEADERS: ResponseHeaders = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
const JSON_HEADERS: ResponseHeaders = { 'content-type': 'application/json' };
const SSE_DONE = 'data: [DONE]\n\n';

export class CliRun implements Dispatcher.DispatchController, SessionWaiter {
  readonly #provider: CliProvider;
  readonly #request: TunnelRequest;
  readonly #handler: CliRunHandler;
  readonly session: string;
  #prompt = '';
  #child: ChildProcess | undefined;
  #pgid = 0;
  /** The group got its final SIGKILL: its id may belong to someone else from now on, so it is never signalled again. */
  #groupEnded = false;
  /** Holds the session's turn (enter() said yes, or sessionGranted() came): leave() is owed, once. */
  #holdsSession = false;
  /** The session's directory, when this run created it: the first turn, whose failure leaves nothing to resume. */
  #createdDir: string | undefined;
  #waitTimer: NodeJS.Timeout | undefined;
  #timeoutTimer: NodeJS.Timeout | undefined;
  #killTimer: NodeJS.Timeout | undefined;
  /** After the command exited: how long its pipes get to close (see #exited). */
  #drainTimer: NodeJS.Timeout | undefined;
  #reason: Error | null = null;
  #paused = false;
  /** The handler got its terminal callback (end or error); nothing more goes to it. */
  #reported = false;
  #headersSent = false;
  #outputBytes = 0;
  readonly #collected: Buffer[] = [];
  readonly #decoder = new StringDecoder('utf8');
  #stderrTail = '';
  /** `data: {…"delta":{` with the run's id, model and time, shared by every chunk. */
  readonly #chunkPrefix: string;

  constructor(provider: CliProvider, request: TunnelRequest, handler: CliRunHandler) {
    this.#provider = provider;
    this.#request = request;
    this.#handler = handler;
    this.session = request.sessionId === '' ? DEFAULT_SESSION : request.sessionId;
    this.#chunkPrefix = `data: {"id":${JSON.stringify(completionId(request.runId))},"object":"chat.completion.chunk","created":${nowSeconds()},"model":${JSON.stringify(request.target)},"choices":[{"index":0,"delta":{`;
  }

  // --- Dispatcher.DispatchController ------------------------------------------------

  get aborted(): boolean {
    return this.#reason !== null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  pause(): void {
    this.#paused = true;
    this.#child?.stdout?.pause();
  }

  resume(): void {
    this.#paused = false;
    this.#child?.stdout?.resume();
  }

  /** Cancelled or past a deadline: stop waiting, or end the process group. The handler hears nothing more. */
  abort(reason: Error): void {
    if (this.#reason !== null) return;
    this.#reason = reason;
    this.#reported = true;
    if (this.#waitTimer !== undefined) {
      clearTimeout(this.#waitTimer);
      this.#waitTimer = undefined;
      this.#provider.sessions.withdraw(this.session, this);
    }
    this.#terminate();
  }

  // --- lifecycle ----------------------------------------------------------------------

  start(): void {
    this.#handler.onRequestStart(this);
    if (this.aborted) return;
    try {
      this.#prompt = extractPrompt(this.#request.body, this.#provider.config.prompt);
    } catch (err) {
      this.#fail(new AgentRunError('cli_bad_request', err instanceof CliRequestError ? err.message : String(err)));
      return;
    }
    if (this.session.startsWith('-') && startsAnArgument(this.#provider.config, '{session}')) {
      // The client names the session: as a whole argument, '-x' would be read as one of the command's options.
      this.#fail(new AgentRunError('cli_bad_request', `session id ${JSON.stringify(this.session)} starts with '-', which this provider's command would read as an option; name the session without a leading '-'`));
      return;
    }
    if (this.#provider.config.input === 'arg' && this.#prompt.includes('\0')) {
      // An argv entry ends at NUL: spawn() would refuse it (input: stdin carries any text).
      this.#fail(new AgentRunError('cli_bad_request', 'the prompt holds a NUL character, which a command-line argument cannot carry'));
      return;
    }
    if (this.#provider.sessions.enter(this.session, this)) {
      this.#holdsSession = true;
      void this.#spawn();
      return;
    }
    this.#waitTimer = setTimeout(onSessionWaitOver, this.#provider.config.sessionWaitMs, this);
  }

  sessionGranted(): void {
    clearTimeout(this.#waitTimer);
    this.#waitTimer = undefined;
    this.#holdsSession = true;
    if (this.aborted) {
      this.#leaveSession();
      return;
    }
    void this.#spawn();
  }

  /** Timer: the session's running process did not finish within session_wait_ms. */
  sessionWaitOver(): void {
    this.#waitTimer = undefined;
    this.#provider.sessions.withdraw(this.session, this);
    this.#fail(new AgentRunError('session_busy', `session ${JSON.stringify(this.session)} still had a run in progress after ${this.#provider.config.sessionWaitMs} ms`));
  }

  /** Timer: timeout_ms passed with the process still running. */
  timedOut(): void {
    this.#timeoutTimer = undefined;
    this.#fail(new AgentRunError('upstream_timeout', `the command did not finish within timeout_ms (${this.#provider.config.timeoutMs} ms)`));
    this.#terminate();
  }

  /**
   * Timer: the command exited kill_grace_ms ago and its pipes are still
   * open: a process it started outside its group (setsid, a daemon) holds
   * them. The run ends with what was read, as Go's exec.Cmd.WaitDelay does.
   * Output held back for a slow client is not the holder's doing: it waits.
   */
  pipesOverdue(): void {
    this.#drainTimer = undefined;
    const child = this.#child;
    if (child === undefined) return;
    // Paused for a slow client, the output waits for it; once nothing more goes to the client (ended, failed,
    // aborted) there is nothing to wait for.
    if (this.#paused && !this.#reported) {
      this.#drainTimer = setTimeout(onPipesOverdue, this.#provider.config.killGraceMs, this);
      return;
    }
    child.stdin?.destroy();
    child.stdout?.destroy();
    child.stderr?.destroy();
  }

  /** Timer: the grace after SIGTERM is over; whatever is left of the group is killed. */
  killNow(): void {
    this.#killTimer = undefined;
    this.#signalGroup('SIGKILL');
  }

  async #spawn(): Promise<void> {
    const config = this.#provider.config;
    let place: { dir: string; existed: boolean };
    try {
      place = await this.#provider.sessions.directory(this.session);
      if (!place.existed) this.#createdDir = place.dir;
    } catch (err) {
      this.#leaveSession();
      this.#fail(new AgentRunError('cli_failed', `no working directory for the session: ${(err as Error).message}`));
      return;
    }
    if (this.aborted) {
      this.#leaveSession();
      return;
    }
    const template = place.existed && config.resumeArgs !== undefined ? config.resumeArgs : config.args;
    const args = expandArgs(template, { prompt: config.input === 'arg' ? this.#prompt : '', model: this.#request.target, session: this.session });
    let child: ChildProcess;
    try {
      child = spawn(config.command[0], [...config.command.slice(1), ...args], {
        cwd: place.dir,
        env: childEnv(config.env),
        // Its own process group, so a cancel reaches every process it started.
        detached: true,
        stdio: [config.input === 'stdin' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
        windowsHide: true,
      });
    } catch (err) {
      // Refused before any process started (an argument Node will not pass): this run fails, never the agent.
      this.#spawnFailed(err as Error);
      return;
    }
    this.#child = child;
    child.on('error', (err) => this.#spawnFailed(err));
    if (child.pid === undefined) return; // 'error' follows
    this.#pgid = child.pid;
    this.#provider.reaper?.add(child.pid, config.killGraceMs);
    this.#timeoutTimer = setTimeout(onRunTimeout, config.timeoutMs, this);
    child.stdout?.on('data', (chunk: Buffer) => this.#stdout(chunk));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => this.#stderr(text));
    child.on('exit', () => this.#exited());
    child.on('close', (code, signal) => this.#closed(code, signal));
    if (child.stdin !== null) {
      // A command that does not read its stdin closes it early: EPIPE is not a failure.
      child.stdin.on('error', ignore);
      child.stdin.end(this.#prompt);
    }
    if (this.#paused) child.stdout?.pause();
  }

  #spawnFailed(err: Error): void {
    if (this.#pgid === 0) {
      // Never started: no 'close' will come to give the session back.
      this.#leaveSession();
      this.#clearTimers();
    }
    // E2BIG: the client's prompt (or session) made an argument longer than the kernel takes: its request, not the program.
    if ((err as NodeJS.ErrnoException).code === 'E2BIG') {
      this.#fail(new AgentRunError('cli_bad_request', 'the prompt is too long to pass as a command-line argument (the kernel takes about 128 KiB in one); send a shorter prompt, or configure this provider with input: stdin'));
      return;
    }
    this.#fail(new AgentRunError('cli_failed', `could not run ${JSON.stringify(this.#provider.config.command[0])}: ${err.message}`));
  }

  #stdout(chunk: Buffer): void {
    if (this.#reported) return;
    this.#outputBytes += chunk.length;
    if (this.#outputBytes > this.#provider.config.maxOutputBytes) {
      this.#fail(new AgentRunError('cli_failed', `the command wrote more than max_output_bytes (${this.#provider.config.maxOutputBytes})`));
      this.#terminate();
      return;
    }
    if (!this.#request.stream) {
      this.#collected.push(chunk);
      return;
    }
    const text = this.#decoder.write(chunk);
    if (text.length > 0) this.#sendDelta(text);
  }

  #stderr(text: string): void {
    const tail = this.#stderrTail + text;
    this.#stderrTail = tail.length > STDERR_TAIL_CHARS ? tail.slice(tail.length - STDERR_TAIL_CHARS) : tail;
  }

  /**
   * The command itself exited: anything it left running in its group goes
   * now (no orphan outlives a run). timeout_ms is over (the command did
   * finish); what it wrote may still be in the pipe, read by 'close', which
   * comes once no process holds the pipes any more.
   */
  #exited(): void {
    if (this.#killTimer === undefined) this.#signalGroup('SIGKILL');
    this.#clearTimers();
    // What the command wrote before it exited may still sit in the pipes (the exit can be seen before
    // their last read): the grace starts on the next turn of the event loop, so the pipes are read once
    // more before it can end, and a short kill_grace_ms (0) never drops the command's own output.
    this.#drainTimer = setTimeout(onDrainStart, 0, this);
  }

  /** Timer: the turn after the command's exit; its pipes now get kill_grace_ms to close. */
  drainStart(): void {
    this.#drainTimer = setTimeout(onPipesOverdue, this.#provider.config.killGraceMs, this);
  }

  #closed(code: number | null, signal: NodeJS.Signals | null): void {
    this.#clearTimers();
    // A SIGTERM'd group may still hold a process that ignores it: the grace timer stays armed for it.
    if (this.#reason === null) this.#signalGroup('SIGKILL');
    // Reported already: it failed (timeout, max_output_bytes) or was aborted.
    this.#leaveSession(code === 0 && !this.#reported);
    if (this.#reported) return;
    if (code !== 0) {
      const how = code === null ? `was killed by ${signal ?? 'a signal'}` : `exited with code ${code}`;
      this.#fail(new AgentRunError('cli_failed', withStderrTail(`the command ${how}`, this.#stderrTail.trim())));
      return;
    }
    if (this.#request.stream) this.#endStream();
    else this.#sendCompletion();
  }

  #endStream(): void {
    const rest = this.#decoder.end();
    if (rest.length > 0) this.#sendDelta(rest);
    if (!this.#headersSent) this.#sendDelta('');
    this.#emit(`${this.#chunkPrefix}},"finish_reason":"stop"}]}\n\n${SSE_DONE}`);
    this.#end();
  }

  #sendCompletion(): void {
    let body: Buffer;
    try {
      const content = Buffer.concat(this.#collected).toString('utf8');
      const completion = {
        id: completionId(this.#request.runId),
        object: 'chat.completion',
        created: nowSeconds(),
        model: this.#request.target,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      };
      body = Buffer.from(JSON.stringify(completion));
    } catch (err) {
      // Past V8's longest string (~512 M characters; a control byte is 6 once escaped): thrown here, in a
      // child's 'close' handler, it would end the whole agent and every tunnel of the node.
      let bytes = 0;
      for (const piece of this.#collected) bytes += piece.length;
      this.#collected.length = 0;
      this.#fail(new AgentRunError('cli_failed', `the command's output (${bytes} bytes) is too large for one JSON answer (${(err as Error).message}); ask with stream: true, or lower max_output_bytes`));
      return;
    }
    this.#headersSent = true;
    this.#handler.onResponseStart(this, 200, JSON_HEADERS);
    if (!this.#reported) this.#handler.onResponseData(this, body);
    this.#end();
  }

  /** One chunk event; the first also carries the assistant role (and sends the head). */
  #sendDelta(text: string): void {
    const first = !this.#headersSent;
    if (first) {
      this.#headersSent = true;
      this.#handler.onResponseStart(this, 200, SSE_HEADERS);
    }
    this.#emit(`${this.#chunkPrefix}${first ? '"role":"assistant",' : ''}"content":${JSON.stringify(text)}},"finish_reason":null}]}\n\n`);
  }

  #emit(event: string): void {
    if (!this.#reported) this.#handler.onResponseData(this, Buffer.from(event));
  }

  #end(): void {
    if (this.#reported) return;
    this.#reported = true;
    this.#handler.onResponseEnd();
  }

  #fail(err: AgentRunError): void {
    if (this.#reported) return;
    this.#reported = true;
    this.#handler.onResponseError(this, err);
  }

  /** SIGTERM to the whole group now, SIGKILL after the grace (whatever ignored it). */
  #terminate(): void {
    if (this.#pgid === 0 || this.#groupEnded || this.#killTimer !== undefined) return;
    this.#signalGroup('SIGTERM');
    this.#killTimer = setTimeout(onKillTimer, this.#provider.config.killGraceMs, this);
  }

  #signalGroup(signal: NodeJS.Signals): void {
    if (this.#pgid === 0 || this.#groupEnded) return;
    try {
      process.kill(-this.#pgid, signal);
    } catch {
      // ESRCH: the group is already gone.
    }
    // SIGKILL is the end of the group: nothing left for the reaper.
    if (signal === 'SIGKILL') {
      this.#groupEnded = true;
      this.#provider.reaper?.remove(this.#pgid);
    }
  }

  /**
   * Gives the session's turn to the next waiter. A first turn that did not
   * finish removes the directory it created first: a later turn chooses
   * resume_args by the directory being there, and there is nothing to
   * resume (a CLI's `--continue` would fail every turn after).
   */
  #leaveSession(turnFinished = false): void {
    if (!this.#holdsSession) return;
    this.#holdsSession = false;
    const created = this.#createdDir;
    this.#createdDir = undefined;
    const sessions = this.#provider.sessions;
    if (created === undefined || turnFinished) {
      sessions.leave(this.session);
      return;
    }
    rm(created, { recursive: true, force: true }).then(
      () => sessions.leave(this.session),
      () => sessions.leave(this.session),
    );
  }

  #clearTimers(): void {
    clearTimeout(this.#timeoutTimer);
    this.#timeoutTimer = undefined;
    clearTimeout(this.#drainTimer);
    this.#drainTimer = undefined;
  }
}

/**
 * `head: tail`, at most MAX_ERROR_MESSAGE_CHARS: the edge cuts a longer message at its end, which would
 * drop the stderr's last lines (where a command says why it failed); its start goes instead, marked `…`.
 */
function withStderrTail(head: string, tail: string): string {
  if (tail === '') return head;
  const room = MAX_ERROR_MESSAGE_CHARS - head.length - 2;
  if (tail.length <= room) return `${head}: ${tail}`;
  let kept = tail.slice(tail.length - room + 1);
  // Not half a surrogate pair at the cut.
  const first = kept.charCodeAt(0);
  if (first >= 0xdc00 && first <= 0xdfff) kept = kept.slice(1);
  return `${head}: …${kept}`;
}

function completionId(runId: string): string {
  return `chatcmpl-${runId}`;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

function ignore(): void {}

function onSessionWaitOver(run: CliRun): void {
  run.sessionWaitOver();
}

function onRunTimeout(run: CliRun): void {
  run.timedOut();
}

function onDrainStart(run: CliRun): void {
  run.drainStart();
}

function onPipesOverdue(run: CliRun): void {
  run.pipesOverdue();
}

function onKillTimer(run: CliRun): void {
  run.killNow();
}

/** Some argument of the command's (args or resume_args) begins with `placeholder`: its value starts that argv entry. */
function startsAnArgument(config: { readonly args: readonly string[]; readonly resumeArgs: readonly string[] | undefined }, placeholder: string): boolean {
  return config.args.some((a) => a.startsWith(placeholder)) || (config.resumeArgs?.some((a) => a.startsWith(placeholder)) ?? false);
}
