// Inline SVG line charts for the 15-minute series: a fixed viewBox (the
// chart never changes size as data arrives), one polyline per series, the
// y-axis top labelled with its value and unit.

const NS = 'http://www.w3.org/2000/svg';
const W = 600;
const H = 170;
/**
 * Left padding for the y-axis labels: the widest one as the browser lays it
 * out, and a gap. A guess per character (tabular digits are ~10 px at 17 px,
 * but "ms" and the font's spaces are not) cut "1000 ms" by two pixels; the
 * guess is left only where nothing is laid out (a hidden chart measures 0).
 */
function leftPad(labels: readonly SVGTextElement[]): number {
  let widest = 0;
  let longest = 0;
  for (const label of labels) {
    widest = Math.max(widest, label.getComputedTextLength());
    longest = Math.max(longest, label.textContent?.length ?? 0);
  }
  return Math.max(40, Math.ceil(widest > 0 ? widest : longest * 12) + 10);
}
const PAD_B = 24;
const PAD_T = 12;

export interface Line {
  readonly name: string;
  readonly className: string;
  readonly values: readonly (number | null)[];
}

function el<K extends keyof SVGElementTagNameMap>(name: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

/** A tidy ceiling for the y axis: 1, 2 or 5 times a power of ten. */
function niceMax(value: number): number {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 5, 10]) if (value <= m * power) return m * power;
  return 10 * power;
}

/** Redraws `svg` with the lines over `times` (ms since the epoch, oldest first) spanning `spanMs` up to now. */
export function drawChart(svg: SVGSVGElement, times: readonly number[], lines: readonly Line[], unit: string, spanMs: number, now: number): void {
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.replaceChildren();
  let max = 0;
  for (const line of lines) for (const v of line.values) if (v !== null && v > max) max = v;
  const top = niceMax(max);
  const y = (v: number): number => H - PAD_B - (v / top) * (H - PAD_B - PAD_T);
  const labels = [0, 0.5, 1].map((frac) => {
    const label = el('text', { y: y(top * frac) + 6, class: 'axis', 'text-anchor': 'end' });
    label.textContent = `${formatTick(top * frac)} ${unit}`;
    svg.append(label);
    return label;
  });
  // Sized to the labels as laid out, so "200000 ms" or "0.50 req/s" is never cut at the chart's left edge.
  const PAD_L = leftPad(labels);
  const x = (t: number): number => PAD_L + ((t - (now - spanMs)) / spanMs) * (W - PAD_L - 4);
  for (const label of labels) {
    label.setAttribute('x', String(PAD_L - 6));
    const yy = Number(label.getAttribute('y')) - 6;
    svg.insertBefore(el('line', { x1: PAD_L, x2: W - 4, y1: yy, y2: yy, class: 'grid' }), label);
  }
  for (const [t, text] of [[now - spanMs, '−15 min'], [now - spanMs / 2, '−7.5 min'], [now, 'now']] as const) {
    const label = el('text', { x: x(t), y: H - 4, class: 'axis', 'text-anchor': t === now ? 'end' : t === now - spanMs ? 'start' : 'middle' });
    label.textContent = text;
    svg.append(label);
  }
  for (const line of lines) {
    // A gap (null: nothing finished in that interval) breaks the line.
    let points: string[] = [];
    const flush = (): void => {
      if (points.length === 1) points.push(points[0]);
      if (points.length > 0) svg.append(el('polyline', { points: points.join(' '), class: `line ${line.className}` }));
      points = [];
    };
    line.values.forEach((v, i) => {
      if (v === null || times[i] < now - spanMs) flush();
      else points.push(`${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`);
    });
    flush();
  }
}

function formatTick(v: number): string {
  return v >= 100 || v === 0 ? String(Math.round(v)) : v.toPrecision(2).replace(/\.0+$/, '');
}
