// Node and V8 flags a process wants from its own config (`runtime.node_flags`).
// Heap and GC-thread sizes are fixed when the isolate is created, so a
// process started without them restarts itself once with them, in place
// (execve: same PID, same stdio, same arguments), before it opens anything.
//
// Why (docs/operations.md "Runtime flags", docs/benchmarks.md):
// - Node starts four V8 helper threads whatever the core count; on a small
//   host their concurrent marking takes every core from the event loop for
//   up to a few hundred milliseconds, which showed as the p99 tail.
// - V8 starts a full mark-compact whenever the old generation's headroom is
//   smaller than the young generation. A proxy's live heap is small (~20 MB)
//   and its young generation grows to 32-64 MB a semi-space under load, so
//   without a floor under the old generation's limit both processes ran a
//   full GC every ~400 ms that freed only young garbage: 22 % of the agent's
//   CPU (docs/benchmarks.md, "The old generation's floor").
// - Not in `auto`, but allowed in a list: by default V8 starts a full
//   mark-compact for every 64 MB of ArrayBuffer memory allocated since the
//   last one, live or not, and a large upload allocates its body five or
//   six times over, so 200 KB uploads ran a full GC every ~100 ms.
//   --external-memory-accounted-in-global-limit counts that memory in the
//   heap's own limit instead (later V8's default): 40 % more uploads and a
//   quarter less CPU per streamed event, but with the 128 MB floor below
//   dead buffers then pile up to hundreds of MB per isolate (a full run
//   with it in `auto`: the edge's peak RSS 1.6-2.5x in most scenarios,
//   1 GB at workers.count 2). docs/benchmarks.md, "Big buffers and full GCs".
import { availableParallelism } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import type { ConfigReader } from './config-reader.js';

/** The flags a config may name: V8 heap and GC-thread sizes, each `--name=<integer>`. */
export const NODE_FLAG_NAMES = ['v8-pool-size', 'max-semi-space-size', 'max-old-space-size', 'initial-old-space-size'] as const;
/**
 * The on/off flags a config may name, as `--name` or `--no-name`. Unlike the
 * sizes they are set in the running process (V8 reads them at each heap
 * decision): Node refuses to start with a V8 flag its V8 does not have,
 * while setting one at run time is ignored there, so a Node whose V8 has
 * dropped a switch (made it the default) still starts.
 */
export const NODE_SWITCH_NAMES = ['external-memory-accounted-in-global-limit'] as const;

const FLAG_FORM = new RegExp(`^--(${NODE_FLAG_NAMES.join('|')})=\\d{1,6}$`);
const SWITCH_FORM = new RegExp(`^--(no-)?(${NODE_SWITCH_NAMES.join('|')})$`);

/** Set in the environment of the restarted process: it never restarts itself twice. */
export const NODE_FLAGS_ENV = 'EDGE_NODE_FLAGS_APPLIED';

/** Node's own V8 helper-thread count, whatever the host. */
export const NODE_DEFAULT_POOL_SIZE = 4;

/**
 * The heap part of `auto`, on every host: at most 32 MB a semi-space, and
 * the old generation's limit floored at 128 MB (V8 caps the floor at half of
 * an operator's --max-old-space-size), so its headroom stays above the young
 * generation's size while the live heap is small (see the note above). Like
 * every V8 flag it applies to each isolate: the main thread and each I/O
 * worker.
 */
export const AUTO_HEAP_FLAGS: readonly string[] = ['--max-semi-space-size=32', '--initial-old-space-size=128'];

/**
 * `auto`: one V8 helper thread fewer than the host's cores (at least 1), so
 * GC never takes the core the event loop runs on (not on hosts of 5 cores or
 * more, where Node's own 4 already leave one), and AUTO_HEAP_FLAGS.
 */
export function autoNodeFlags(cores: number): string[] {
  const pool = Math.max(1, Math.floor(cores) - 1);
  return pool >= NODE_DEFAULT_POOL_SIZE ? [...AUTO_HEAP_FLAGS] : [`--v8-pool-size=${pool}`, ...AUTO_HEAP_FLAGS];
}

/** The least value of each sized flag a process starts with: below it V8 aborts at start or cannot run the edge (a 1 MB old space dies of OOM). */
const FLAG_MINIMUMS: Readonly<Record<(typeof NODE_FLAG_NAMES)[number], number>> = {
  // 0 is Node's own "as many as the host's cores".
  'v8-pool-size': 0,
  'max-semi-space-size': 1,
  'max-old-space-size': 64,
  'initial-old-space-size': 1,
};

/** Why `flag` is not one a config may name, or undefined when it is. */
export function nodeFlagProblem(flag: string): string | undefined {
  if (SWITCH_FORM.test(flag)) return undefined;
  if (FLAG_FORM.test(flag)) {
    const eq = flag.indexOf('=');
    const name = flag.slice(2, eq) as (typeof NODE_FLAG_NAMES)[number];
    const least = FLAG_MINIMUMS[name];
    return Number(flag.slice(eq + 1)) >= least ? undefined : `--${name} must be at least ${least}${name.endsWith('space-size') ? ' (MB)' : ''}; got '${flag}'`;
  }
  return `expected one of ${NODE_FLAG_NAMES.map((n) => `--${n}=<integer>`).join(', ')}, ${NODE_SWITCH_NAMES.map((n) => `--[no-]${n}`).join(', ')}; got '${flag}'`;
}

/** A config's `runtime.node_flags`: `auto` (the default: sized for this host's cores), or a list of allowed flags ([] = none). */
export function readNodeFlags(r: ConfigReader, path: string, raw: unknown): readonly string[] {
  if (raw === undefined || raw === null || raw === 'auto') return autoNodeFlags(availableParallelism());
  if (!Array.isArray(raw)) {
    r.problems.push(`${path}: expected 'auto' or a list of flags, got ${JSON.stringify(raw)}`);
    return [];
  }
  const flags: string[] = [];
  for (const [i, flag] of raw.entries()) {
    const problem = typeof flag === 'string' ? nodeFlagProblem(flag) : `expected a string, got ${JSON.stringify(flag)}`;
    if (problem === undefined) flags.push(flag as string);
    else r.problems.push(`${path}[${i}]: ${problem}`);
  }
  return flags;
}

function flagName(arg: string): string | undefined {
  if (!arg.startsWith('--')) return undefined;
  const eq = arg.indexOf('=');
  // Node and V8 read --a_b as --a-b; --no-x turns x off, so it names x.
  const name = (eq < 0 ? arg.slice(2) : arg.slice(2, eq)).replaceAll('_', '-');
  return name.startsWith('no-') ? name.slice(3) : name;
}

/** Flags that size V8's heap as a whole: an operator who gave one sized the generations too. */
const WHOLE_HEAP_FLAGS = ['max-heap-size', 'initial-heap-size', 'min-semi-space-size'];
/** The generation sizes a whole-heap flag already decides (V8 aborts at start on --max-heap-size with both max sizes). */
const GENERATION_FLAGS = new Set(['max-semi-space-size', 'max-old-space-size', 'initial-old-space-size']);

/**
 * The wanted flags whose names the process was not started with (on its
 * command line or in NODE_OPTIONS): an operator's own choice always wins,
 * and where the operator sized the heap as a whole, no generation size is
 * added to it.
 */
export function missingNodeFlags(wanted: readonly string[], execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = new Set<string>();
  for (const arg of [...execArgv, ...(nodeOptions ?? '').split(/\s+/)]) {
    const name = flagName(arg);
    if (name !== undefined) given.add(name);
  }
  const wholeHeap = WHOLE_HEAP_FLAGS.some((name) => given.has(name));
  return wanted.filter((flag) => {
    const name = flagName(flag);
    return name !== undefined && !given.has(name) && !(wholeHeap && GENERATION_FLAGS.has(name));
  });
}

/** Switches applyNodeFlags set in this process. */
const switchesSet: string[] = [];

/**
 * Called by a CLI once its config is read, before it opens anything: sets
 * the switches of `wanted` it lacks, and when it lacks some of the sizes,
 * replaces itself with itself started with them added (same PID, stdio and
 * arguments; the new process sets the switches again). Returns only when it
 * did not have to, or could not: then the flags it runs without, and why (to log).
 */
export function applyNodeFlags(wanted: readonly string[]): { readonly nodeFlags: readonly string[]; readonly reason: string } | undefined {
  const missing = missingNodeFlags(wanted, process.execArgv, process.env.NODE_OPTIONS);
  const sizes: string[] = [];
  for (const flag of missing) {
    if (!SWITCH_FORM.test(flag)) sizes.push(flag);
    else if (!switchesSet.includes(flag)) {
      setFlagsFromString(flag);
      switchesSet.push(flag);
    }
  }
  return sizes.length === 0 ? undefined : { nodeFlags: sizes, reason: restartWith(sizes) };
}

/** The flags this process runs with: its command line's, and the switches set since (logs, GET /admin/status). */
export function runningNodeFlags(): string[] {
  return [...process.execArgv, ...switchesSet];
}

function restartWith(flags: readonly string[]): string {
  if (process.env[NODE_FLAGS_ENV] !== undefined) return `already restarted once (${NODE_FLAGS_ENV} is set)`;
  const execve = process.execve;
  if (typeof execve !== 'function') return 'process.execve is not available on this platform';
  const args = [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)];
  try {
    execve.call(process, process.execPath, args, { ...process.env, [NODE_FLAGS_ENV]: flags.join(' ') });
  } catch (err) {
    return `execve failed: ${(err as Error).message}`;
  }
  return 'execve returned';
}
