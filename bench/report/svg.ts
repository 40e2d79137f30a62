// A tiny horizontal bar-chart generator: categories (targets) down the left,
// one bar per series in each, the median as the bar and the spread (min-max
// over repetitions) as a whisker. Plain SVG text, no dependency.

export interface BarSeries {
  readonly name: string;
  readonly values: readonly (number | undefined)[];
  readonly lows?: readonly (number | undefined)[];
  readonly highs?: readonly (number | undefined)[];
}

export interface BarChart {
  readonly title: string;
  readonly subtitle?: string;
  readonly unit: string;
  readonly categories: readonly string[];
  readonly series: readonly BarSeries[];
}

const COLORS = ['#2f6fb3', '#e07b39', '#3a9a5b', '#b5454b', '#7b5ea7', '#8c8c8c'];
const WIDTH = 760;
const LABEL_W = 190;
const VALUE_W = 90;
const BAR_H = 16;
const BAR_GAP = 3;
const GROUP_GAP = 12;
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** The smallest round scale end at least `x` (quarters of it label the grid). */
function niceCeil(x: number): number {
  if (!(x > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(x));
  for (const step of [1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10]) if (step * power >= x * 1.02) return step * power;
  return 10 * power;
}

export function formatNumber(value: number): string {
  const abs = Math.abs(value);
  if (abs === 0) return '0';
  if (abs >= 100_000) return `${Math.round(value / 1000)}k`;
  if (abs >= 10_000) return `${(value / 1000).toFixed(1)}k`;
  if (abs >= 100) return String(Math.round(value));
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toFixed(3);
}

/** Legend entries left to right from the plot's left edge, wrapping to a new row at the chart's width. */
function legendLayout(series: readonly BarSeries[]): { rows: number; at: { x: number; row: number }[] } {
  const at: { x: number; row: number }[] = [];
  let x = LABEL_W;
  let row = 0;
  for (const s of series) {
    const w = 26 + s.name.length * 7;
    if (x > LABEL_W && x + w > WIDTH - 10) {
      row++;
      x = LABEL_W;
    }
    at.push({ x, row });
    x += w;
  }
  return { rows: row + 1, at };
}

export function barChartSvg(chart: BarChart): string {
  const { categories, series } = chart;
  const legendRows = legendLayout(series).rows;
  const legendH = series.length > 1 ? 22 * legendRows : 0;
  const top = 44 + (chart.subtitle !== undefined ? 16 : 0) + legendH;
  const groupH = series.length * (BAR_H + BAR_GAP) - BAR_GAP;
  const plotH = categories.length * (groupH + GROUP_GAP);
  const axisH = 26;
  const height = top + plotH + axisH + 8;
  const plotW = WIDTH - LABEL_W - VALUE_W - 10;
  let highest = 0;
  for (const s of series) {
    for (let i = 0; i < categories.length; i++) highest = Math.max(highest, s.highs?.[i] ?? 0, s.values[i] ?? 0);
  }
  const scaleMax = niceCeil(highest);
  const x = (v: number): number => LABEL_W + (Math.max(0, v) / scaleMax) * plotW;

  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ${FONT} font-size="12">`);
  parts.push(`<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`);
  parts.push(`<text x="10" y="22" font-size="15" font-weight="600" fill="#222">${escapeXml(chart.title)}</text>`);
  if (chart.subtitle !== undefined) parts.push(`<text x="10" y="40" fill="#666">${escapeXml(chart.subtitle)}</text>`);
  if (series.length > 1) {
    const { at } = legendLayout(series);
    series.forEach((s, i) => {
      const lx = at[i].x;
      const ly = top - legendH + 4 + at[i].row * 22;
      parts.push(`<rect x="${lx}" y="${ly}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`);
      parts.push(`<text x="${lx + 16}" y="${ly + 10}" fill="#333">${escapeXml(s.name)}</text>`);
    });
  }
  // Grid: five steps of the scale.
  for (let step = 0; step <= 4; step++) {
    const v = (scaleMax * step) / 4;
    const gx = x(v);
    parts.push(`<line x1="${gx.toFixed(1)}" y1="${top - 4}" x2="${gx.toFixed(1)}" y2="${top + plotH}" stroke="#e4e4e4"/>`);
    parts.push(`<text x="${gx.toFixed(1)}" y="${top + plotH + 16}" text-anchor="middle" fill="#666">${formatNumber(v)}</text>`);
  }
  parts.push(`<text x="${WIDTH - 10}" y="${top + plotH + 16}" text-anchor="end" fill="#666">${escapeXml(chart.unit)}</text>`);

  categories.forEach((category, ci) => {
    const gy = top + ci * (groupH + GROUP_GAP);
    parts.push(`<text x="${LABEL_W - 8}" y="${(gy + groupH / 2 + 4).toFixed(1)}" text-anchor="end" fill="#222">${escapeXml(category)}</text>`);
    series.forEach((s, si) => {
      const y = gy + si * (BAR_H + BAR_GAP);
      const value = s.values[ci];
      const color = COLORS[si % COLORS.length];
      if (value === undefined || !Number.isFinite(value)) {
        parts.push(`<text x="${LABEL_W + 4}" y="${y + BAR_H - 4}" fill="#999">n/a</text>`);
        return;
      }
      const w = Math.max(1, x(value) - LABEL_W);
      parts.push(`<rect x="${LABEL_W}" y="${y}" width="${w.toFixed(1)}" height="${BAR_H}" fill="${color}"><title>${escapeXml(`${category} ${s.name}: ${formatNumber(value)} ${chart.unit}`)}</title></rect>`);
      const low = s.lows?.[ci];
      const high = s.highs?.[ci];
      let textX = x(value);
      if (low !== undefined && high !== undefined && high > low) {
        const cy = y + BAR_H / 2;
        parts.push(`<line x1="${x(low).toFixed(1)}" y1="${cy}" x2="${x(high).toFixed(1)}" y2="${cy}" stroke="#222" stroke-width="1.2"/>`);
        parts.push(`<line x1="${x(low).toFixed(1)}" y1="${cy - 4}" x2="${x(low).toFixed(1)}" y2="${cy + 4}" stroke="#222" stroke-width="1.2"/>`);
        parts.push(`<line x1="${x(high).toFixed(1)}" y1="${cy - 4}" x2="${x(high).toFixed(1)}" y2="${cy + 4}" stroke="#222" stroke-width="1.2"/>`);
        textX = Math.max(textX, x(high));
      }
      parts.push(`<text x="${(textX + 5).toFixed(1)}" y="${y + BAR_H - 4}" fill="#333">${formatNumber(value)}</text>`);
    });
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
