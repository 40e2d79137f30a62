// An edge or agent that cannot start for a reason an operator fixes (a port
// in use, a file it cannot read): the binaries print its message, which names
// the config key, as one line instead of a stack. Anything else still prints
// its stack: that is a bug to report.
import { dialAddress } from './url-host.js';

export class StartError extends Error {
  override readonly name = 'StartError';
}

const REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is in use (by another process, or another listener of this config)',
  EACCES: 'permission denied (a port below 1024 needs privileges)',
  EADDRNOTAVAIL: "the address is not one of this host's",
};

/** `key`: the config path of the listener (listen.http, admin, …). */
export function listenError(key: string, host: string, port: number, err: unknown): StartError {
  const error = err as NodeJS.ErrnoException;
  // grpc-js reports "No address added …" and keeps the cause in its message's tail.
  const code = error.code ?? /\b(EADDRINUSE|EACCES|EADDRNOTAVAIL)\b/.exec(error.message ?? '')?.[1];
  const words = code !== undefined ? REASONS[code] : undefined;
  const reason = words !== undefined ? `${words} (${code})` : (error.message ?? String(err));
  return new StartError(`${key}: cannot listen on ${dialAddress(host, port)}: ${reason}`);
}
