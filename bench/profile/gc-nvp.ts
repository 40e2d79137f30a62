// Summarises V8's --trace-gc-nvp lines (one `key=value` line per
// collection): how many scavenges and full collections a process ran, how
// long they paused it, and how much each scavenge found alive and promoted.
// ab.ts --gc prints it for the edge and the agent of every round.

export interface GcSummary {
  readonly scavenges: number;
  readonly scavengePauseMs: number;
  readonly survivedKb: number;
  readonly promotedKb: number;
  /** Mark-compacts (gc=mc) and minor mark-sweeps (gc=ms). */
  readonly fullGcs: number;
  readonly fullPauseMs: number;
}

/** Reads every `gc=` line of `text` (a log); means are per collection, 0 when there were none. */
export function summariseGcNvp(text: string): GcSummary {
  let scavenges = 0;
  let scavengePause = 0;
  let survived = 0;
  let promoted = 0;
  let full = 0;
  let fullPause = 0;
  for (const line of text.split('\n')) {
    const kind = field(line, 'gc');
    if (kind === undefined) continue;
    const pause = Number(field(line, 'pause') ?? 0);
    if (kind === 's') {
      scavenges++;
      scavengePause += pause;
      survived += Number(field(line, 'new_space_survived') ?? 0);
      promoted += Number(field(line, 'promoted') ?? 0);
    } else if (kind === 'mc' || kind === 'ms') {
      full++;
      fullPause += pause;
    }
  }
  return {
    scavenges,
    scavengePauseMs: scavenges === 0 ? 0 : scavengePause / scavenges,
    survivedKb: scavenges === 0 ? 0 : survived / scavenges / 1024,
    promotedKb: scavenges === 0 ? 0 : promoted / scavenges / 1024,
    fullGcs: full,
    fullPauseMs: full === 0 ? 0 : fullPause / full,
  };
}

export function formatGc(s: GcSummary): string {
  return `${s.scavenges} scavenges (mean pause ${s.scavengePauseMs.toFixed(2)} ms, survived ${s.survivedKb.toFixed(0)} KB, promoted ${s.promotedKb.toFixed(0)} KB), ${s.fullGcs} full (mean pause ${s.fullPauseMs.toFixed(2)} ms)`;
}

/** The first ` key=value` of a line (keys repeat: `promoted=` is a byte count before `promoted=` the node count; the first is the bytes). */
function field(line: string, key: string): string | undefined {
  const at = line.indexOf(` ${key}=`);
  if (at < 0) return undefined;
  const from = at + key.length + 2;
  const end = line.indexOf(' ', from);
  return line.slice(from, end < 0 ? line.length : end);
}
