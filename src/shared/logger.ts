// pino everywhere: JSON lines by default, human-readable only when asked
// (--pretty or NODE_ENV=development), credentials always redacted.
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
  'keySha256',
  '*.keySha256',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers["x-api-key"]',
  '*.headers["x-api-key"]',
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
  return setup.destination === undefined ? pino(options) : pino(options, setup.destination);
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
