// pino everywhere: JSON lines by default, credentials redacted.
import { pino, type Logger, type LoggerOptions } from 'pino';

export const REDACT_PATHS = ['token', '*.token', 'api_key', '*.api_key', 'apiKey', '*.apiKey', 'authorization', '*.authorization', 'headers.authorization'];

export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  const options: LoggerOptions = { name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  return pino(options);
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
