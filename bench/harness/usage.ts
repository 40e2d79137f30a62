// CPU, peak memory and event-loop lag of a target's processes over one
// measurement: a snapshot before, a snapshot after, and an RSS sampler in
// between (the fallback where VmHWM cannot be reset).
import { CLK_TCK, descendants, processTicks, resetPeakRss, statusKb, threadTicks } from './proc-stats.js';
import { scrapeLagP99 } from './metrics.js';
import type { ProcessUsage, RunningTarget, WatchedProcess } from './types.js';

const SAMPLE_MS = 250;

interface Before {
  readonly ticks: number;
  readonly mainTicks: number;
  readonly threads: ReadonlyMap<string, number>;
  readonly hwmReset: boolean;
  sampledKb: number;
}

function pidsOf(process: WatchedProcess): number[] {
  return process.tree ? [process.pid, ...descendants(process.pid)] : [process.pid];
}

function rssKb(process: WatchedProcess, field: 'VmHWM' | 'VmRSS'): number {
  let kb = 0;
  for (const pid of pidsOf(process)) kb += statusKb(pid, field);
  return kb;
}

export class UsageProbe {
  readonly #target: RunningTarget;
  readonly #before = new Map<WatchedProcess, Before>();
  #sampler: NodeJS.Timeout | undefined;
  #loadgen: NodeJS.CpuUsage | undefined;

  constructor(target: RunningTarget) {
    this.#target = target;
  }

  async start(): Promise<void> {
    // The scrape resets the lag histogram so the closing one covers this measurement only.
    if (this.#target.metricsUrl !== undefined) await scrapeLagP99(this.#target.metricsUrl);
    for (const p of this.#target.processes) {
      let hwmReset = true;
      let ticks = 0;
      for (const pid of pidsOf(p)) {
        hwmReset = resetPeakRss(pid) && hwmReset;
        ticks += processTicks(pid);
      }
      const threads = threadTicks(p.pid);
      this.#before.set(p, { ticks, mainTicks: threads.main, threads: threads.byName, hwmReset, sampledKb: rssKb(p, 'VmRSS') });
    }
    this.#sampler = setInterval(() => this.#sample(), SAMPLE_MS);
    this.#sampler.unref();
    this.#loadgen = process.cpuUsage();
  }

  #sample(): void {
    for (const [p, before] of this.#before) before.sampledKb = Math.max(before.sampledKb, rssKb(p, 'VmRSS'));
  }

  async finish(requests: number): Promise<{ processes: ProcessUsage[]; edgeLagP99Ms: number | null; loadgenCpuS: number }> {
    const loadgen = process.cpuUsage(this.#loadgen);
    clearInterval(this.#sampler);
    this.#sample();
    const processes: ProcessUsage[] = [];
    for (const [p, before] of this.#before) {
      let ticks = 0;
      for (const pid of pidsOf(p)) ticks += processTicks(pid);
      // A tree's children may have changed (never for nginx in a run); clamp rather than report negative CPU.
      const cpuS = Math.max(0, ticks - before.ticks) / CLK_TCK;
      const after = threadTicks(p.pid);
      const threads: Record<string, number> = {};
      for (const [name, t] of after.byName) threads[name] = Math.max(0, t - (before.threads.get(name) ?? 0)) / CLK_TCK;
      const peakKb = before.hwmReset ? Math.max(rssKb(p, 'VmHWM'), before.sampledKb) : before.sampledKb;
      processes.push({
        role: p.role,
        pid: p.pid,
        cpuS,
        cpuSPer1k: requests > 0 ? (cpuS / requests) * 1000 : null,
        mainThreadCpuS: Math.max(0, after.main - before.mainTicks) / CLK_TCK,
        peakRssMB: peakKb / 1024,
        threads,
      });
    }
    let edgeLagP99Ms: number | null = null;
    if (this.#target.metricsUrl !== undefined) edgeLagP99Ms = (await scrapeLagP99(this.#target.metricsUrl)) ?? null;
    return { processes, edgeLagP99Ms, loadgenCpuS: (loadgen.user + loadgen.system) / 1e6 };
  }
}
