// A fault nothing caught (a thrown error, or a rejected promise no one
// awaited) ends the process: its state is unknown. Without this, Node
// prints a bare stack on stderr and exits 1, outside the JSON log that
// operators collect; with it the log has one `fatal` line saying what
// happened, and the exit code (70, EX_SOFTWARE) tells a supervisor it was
// a fault, not a stop. What the process held is released by its peers: the
// edge fails the node's tunnels when its stream ends, and the agent's cli
// runs are killed by their group reaper when the agent's pipe closes.
import type { Logger } from 'pino';

export const FAULT_EXIT_CODE = 70;

/** Installs the handler for the process's life. A rejection no one handled reaches it too (Node's default: throw). */
export function exitOnFault(logger: Logger, what: string): void {
  process.on('uncaughtException', (err: unknown, origin: string) => {
    try {
      logger.fatal({ err, origin }, `${what}: an error nothing caught; exiting`);
    } finally {
      process.exit(FAULT_EXIT_CODE);
    }
  });
}
