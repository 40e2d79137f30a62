// The Node.js version gate for the installed commands. A package installed
// globally runs under whatever `node` is first on PATH, and an older one
// fails deep inside the module graph (Node 20: "does not provide an export
// named 'isMarkedAsUntransferable'") before any code of ours runs. So the
// bin entry points import only this module (no imports of its own, plain
// syntax), ask it, and load the real CLI only on a Node that can run it.

/** The oldest Node.js the edge runs on: worker threads sharing a listening port (`reusePort`) arrived in 22.12. Keep in step with package.json `engines.node`. */
export const MINIMUM_NODE = '22.12.0';

function parse(version: string): number[] {
  return version
    .replace(/^v/, '')
    .split('.')
    .slice(0, 3)
    .map((part) => Number.parseInt(part, 10) || 0);
}

/** True when `running` (e.g. `process.versions.node`) is at least `minimum`. */
export function nodeIsAtLeast(running: string, minimum = MINIMUM_NODE): boolean {
  const have = parse(running);
  const need = parse(minimum);
  for (let i = 0; i < 3; i++) {
    if ((have[i] ?? 0) !== (need[i] ?? 0)) return (have[i] ?? 0) > (need[i] ?? 0);
  }
  return true;
}

/** The message for a Node that is too old, or undefined when this one will do. */
export function nodeVersionProblem(program: string, running = process.versions.node, execPath = process.execPath): string | undefined {
  if (nodeIsAtLeast(running)) return undefined;
  return (
    `${program}: needs Node.js ${MINIMUM_NODE} or newer (Node 24 LTS recommended); ` +
    `this is Node.js v${running} (${execPath}).\n` +
    `Put a newer node first on PATH, or set PATH in the service unit (see docs/deploy.md).\n`
  );
}

/** Signals held by startCli until the CLI installs its own handler: whether each has arrived. */
const held = new Map<string, { arrived: boolean; listener: () => void }>();

/**
 * Stops holding `signal` and says whether it arrived while held. The CLI
 * calls it when it installs its own handler (after its module graph and
 * config have loaded, well over a second on a busy host).
 */
export function releaseHeldSignal(signal: 'SIGHUP'): boolean {
  const entry = held.get(signal);
  if (entry === undefined) return false;
  held.delete(signal);
  process.removeListener(signal, entry.listener);
  return entry.arrived;
}

/**
 * A bin entry point: on a Node that will do, `load` the real CLI; else one
 * clear line and exit code 1. `hold`: signals whose default action (ending
 * the process) must not run before the CLI handles them, e.g. the edge's
 * SIGHUP, which systemd's `reload` sends whenever the unit is active, from
 * right after the exec on: each is noted for releaseHeldSignal instead.
 */
export function startCli(program: string, load: () => Promise<unknown>, hold: readonly 'SIGHUP'[] = []): void {
  const problem = nodeVersionProblem(program);
  if (problem !== undefined) {
    process.stderr.write(problem);
    process.exitCode = 1;
    return;
  }
  for (const signal of hold) {
    const entry = { arrived: false, listener: () => (entry.arrived = true) };
    held.set(signal, entry);
    process.on(signal, entry.listener);
  }
  load().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
