// Reads the edge's event-loop lag from its Prometheus endpoint. prom-client's
// default nodejs_eventloop_lag_p99_seconds covers the time since the previous
// scrape (it resets its histogram on every collect), so one scrape before a
// measurement and one after give the p99 of exactly that window.
import { request } from 'undici';

const LAG_P99 = 'nodejs_eventloop_lag_p99_seconds';

/** The largest nodejs_eventloop_lag_p99_seconds sample (over worker labels, if any), in ms; undefined when absent. */
export function lagP99FromText(text: string): number | undefined {
  let worst: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(LAG_P99)) continue;
    const rest = line.slice(LAG_P99.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) worst = Math.max(worst ?? 0, value * 1000);
  }
  return worst;
}

export async function scrapeLagP99(metricsUrl: string): Promise<number | undefined> {
  try {
    const res = await request(metricsUrl, { headersTimeout: 3_000, bodyTimeout: 3_000 });
    const text = await res.body.text();
    return res.statusCode === 200 ? lagP99FromText(text) : undefined;
  } catch {
    return undefined;
  }
}
