// pino everywhere: JSON lines by default, human-readable only when asked
// (--pretty or NODE_ENV=development), credentials always redacted.
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/** Every place a credential can sit in a log object: tokens, API keys, authorization headers. */
export const REDACT_PATHS = [
  'token',
  '*.token',
  'api_key',
  '*.api_key',
  'apiKey',
  '*.apiKey',
  'keySha256s',
  '*.keySha256s',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers["x-api-key"]',
  '*.headers["x-api-key"]',
  'headers["api-key"]',
  '*.headers["api-key"]',
  'headers["x-goog-api-key"]',
  '*.headers["x-goog-api-key"]',
  'req.headers.authorization',
  'admin.token',
  '*.admin.token',
  'nodes[*].token',
  '*.nodes[*].token',
];

/** pino's levels: any other level makes pino throw its own message, which names no setting. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The one-line complaint about a LOG_LEVEL pino would refuse; undefined when it is unset or valid. */
export function logLevelEnvProblem(level: string | undefined): string | undefined {
  if (level === undefined || (LOG_LEVELS as readonly string[]).includes(level)) return undefined;
  return `LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}; got ${JSON.stringify(level)}`;
}

export interface LoggerSetup {
  /** Human-readable lines (pino-pretty) instead of JSON; default: NODE_ENV=development. */
  readonly pretty?: boolean;
  /** Where JSON lines go instead of stdout (tests). */
  readonly destination?: DestinationStream;
}

function prettyStream(): DestinationStream {
  // Loaded only when asked for: JSON output never pays for it.
  const require = createRequire(import.meta.url);
  const build = require('pino-pretty') as (options: { sync: boolean; colorize: boolean; translateTime: string; ignore: string }) => DestinationStream;
  return build({ sync: true, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
}

/** What pino's stdout destination (sonic-boom 4) holds unwritten: its private fields, read only by flushOnExit. */
interface SonicBoomBuffers {
  fd: number;
  _writing: boolean;
  _writingBuf: string | Buffer;
  _bufs: (string | Buffer)[];
  _len: number;
}

/** Where the exit flush waits out a full pipe (the process is exiting: nothing else has to run). */
const exitPause = new Int32Array(new SharedArrayBuffer(4));

/**
 * The exit flush of the stdout destination. pino writes what is still buffered on exit with the
 * destination's flushSync, and sonic-boom 4's (pino 10's) retries a write that failed every 100 ms
 * for ever: with the reader of stdout gone (EPIPE: the parent died or closed its end) the process
 * never exits, and no later signal ends it, as no handler runs. This one writes the same bytes in
 * the same order, waits out a full pipe as sonic-boom does, and gives up on any other failure.
 */
function flushOnExit(this: SonicBoomBuffers): void {
  // A write in flight (asynchronous) is the thread pool's to finish, as in sonic-boom's own.
  const pending = this._writing ? this._bufs : [this._writingBuf, ...this._bufs];
  let rest = Buffer.concat(pending.map((chunk) => (typeof chunk === 'string' ? Buffer.from(chunk) : chunk)));
  this._bufs = [];
  if (!this._writing) this._writingBuf = '';
  this._len = this._writing ? Buffer.byteLength(this._writingBuf) : 0;
  while (rest.length > 0) {
    try {
      rest = rest.subarray(writeSync(this.fd, rest));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EAGAIN' && code !== 'EBUSY') return; // nothing more reaches the reader
      Atomics.wait(exitPause, 0, 0, 100);
    }
  }
}

/** pino's default destination (stdout, written asynchronously) with an exit flush that ends. */
function stdoutDestination(): DestinationStream {
  const destination = pino.destination({ dest: 1, sync: false });
  // Only over the buffers it knows: a sonic-boom that keeps them otherwise keeps its own flush (and its EPIPE loop).
  const buffers = destination as unknown as Partial<SonicBoomBuffers>;
  if (typeof buffers.fd === 'number' && typeof buffers._writing === 'boolean' && Array.isArray(buffers._bufs) && typeof buffers._len === 'number' && buffers._writingBuf !== undefined) {
    (destination as unknown as { flushSync: typeof flushOnExit }).flushSync = flushOnExit;
  }
  return destination;
}

/** Loggers createLogger made pretty (their children inherit from them: pino builds a child with Object.create). */
const prettyLoggers = new WeakSet<object>();

/** Whether `logger` (or the logger it is a child of) writes human-readable lines: threads it starts log alike. */
export function writesPretty(logger: Logger): boolean {
  for (let l: object | null = logger; l !== null; l = Object.getPrototypeOf(l) as object | null) if (prettyLoggers.has(l)) return true;
  return false;
}

export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info', setup: LoggerSetup = {}): Logger {
  const options: LoggerOptions = { name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  const pretty = setup.pretty ?? process.env.NODE_ENV === 'development';
  if (pretty) {
    const logger = pino(options, prettyStream());
    prettyLoggers.add(logger);
    return logger;
  }
  return pino(options, setup.destination ?? stdoutDestination());
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
