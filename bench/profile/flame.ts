// Turns a V8 .cpuprofile (node --cpu-prof) into a self-contained flame graph
// SVG and a summary: the functions with the most self time and the same time
// grouped by area (our folders, fastify, grpc-js, protobuf, Node internals,
// GC). Written here, not downloaded, so profiles render on a machine without
// network access. The SVG has a <title> on every frame (hover shows name,
// file and share of busy time); frames narrower than 0.1 % are dropped.

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}

export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface SelfRow {
  readonly name: string;
  readonly where: string;
  readonly selfUs: number;
  readonly percent: number;
}

export interface AreaRow {
  readonly area: string;
  readonly selfUs: number;
  readonly percent: number;
}

export interface ProfileSummary {
  readonly svg: string;
  readonly samples: number;
  /** Sampled time not spent idle, in µs. */
  readonly busyUs: number;
  readonly totalUs: number;
  readonly top: readonly SelfRow[];
  readonly areas: readonly AreaRow[];
}

const NON_BUSY = new Set(['(idle)', '(root)']);

function shortUrl(url: string): string {
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return url.slice(dist + '/dist/'.length);
  return url.replace(/^file:\/\//, '');
}

/** Which part of the stack a frame belongs to, from its script URL. */
export function areaOf(url: string, functionName: string): string {
  if (url === '') {
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(program)') return '(program): V8/native outside JS';
    return '';
  }
  const s = shortUrl(url);
  if (s.startsWith('@bufbuild/')) return 'protobuf (@bufbuild)';
  if (s.startsWith('@grpc/')) return 'grpc-js';
  if (/^(fastify|find-my-way|avvio|light-my-request|@fastify|fast-json-stringify|secure-json-parse|pino|thread-stream|sonic-boom)\b/.test(s)) return 'fastify (+pino)';
  if (s.startsWith('prom-client') || s.startsWith('tdigest') || s.startsWith('bintrees')) return 'prom-client';
  if (s.startsWith('undici')) return 'undici';
  if (s.startsWith('src/')) {
    const parts = s.split('/');
    return parts.length > 3 ? `ours: ${parts[1]}/${parts[2]}` : `ours: ${parts[1]}`;
  }
  if (s.startsWith('node:internal/http2') || s.startsWith('node:http2')) return 'node http2';
  if (s.startsWith('node:_http') || s.startsWith('node:http')) return 'node http';
  if (/^node:internal\/(stream_base_commons|net)|^node:net/.test(s)) return 'node net';
  if (/^node:internal\/streams|^node:stream/.test(s)) return 'node streams';
  if (/^node:internal\/(timers|process\/task_queues)|^node:timers/.test(s)) return 'node timers/ticks';
  if (s.startsWith('node:')) return 'node other';
  return `other: ${s.split('/')[0]}`;
}

interface Tree {
  readonly byId: Map<number, ProfileNode>;
  readonly parent: Map<number, number>;
  readonly selfUs: Map<number, number>;
  readonly totalUs: Map<number, number>;
  readonly rootId: number;
  readonly sampleCount: number;
}

/** Sample timestamps are µs on the monotonic clock, the same as process.hrtime: a window picks out the load phase. */
export interface Window {
  readonly fromUs: number;
  readonly toUs: number;
}

function buildTree(profile: CpuProfile, window: Window | undefined): Tree {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) byId.set(node.id, node);
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time since the previous sample: it belongs to sample i.
  let at = profile.startTime;
  let sampleCount = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = Math.max(0, profile.timeDeltas[i] ?? 0);
    at += delta;
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) continue;
    sampleCount++;
    const id = profile.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
  }
  const totalUs = new Map<number, number>();
  const rootId = profile.nodes[0].id;
  const visit = (id: number): number => {
    const node = byId.get(id);
    let sum = selfUs.get(id) ?? 0;
    for (const child of node?.children ?? []) sum += visit(child);
    totalUs.set(id, sum);
    return sum;
  };
  visit(rootId);
  return { byId, parent, selfUs, totalUs, rootId, sampleCount };
}

function frameLabel(frame: CallFrame): string {
  return frame.functionName === '' ? '(anonymous)' : frame.functionName;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function colour(area: string): string {
  if (area.startsWith('ours')) return '#e8a33d';
  if (area.startsWith('protobuf')) return '#c0504d';
  if (area.startsWith('grpc')) return '#9b59b6';
  if (area.startsWith('fastify')) return '#4f81bd';
  if (area === 'GC') return '#7f7f7f';
  if (area.startsWith('node')) return '#8fbc5a';
  if (area.startsWith('prom')) return '#f7c6a3';
  return '#d9d9d9';
}

export function renderProfile(profile: CpuProfile, title: string, window?: Window): ProfileSummary {
  const tree = buildTree(profile, window);
  const totalUs = tree.totalUs.get(tree.rootId) ?? 0;
  let idleUs = 0;
  for (const [id, us] of tree.selfUs) if (NON_BUSY.has(tree.byId.get(id)?.callFrame.functionName ?? '')) idleUs += us;
  const busyUs = Math.max(1, totalUs - idleUs);

  // Native frames (no URL) take the area of their nearest JS ancestor: writev is the cost of the net code that called it.
  const areaMemo = new Map<number, string>();
  const areaOfNode = (id: number): string => {
    const cached = areaMemo.get(id);
    if (cached !== undefined) return cached;
    const frame = tree.byId.get(id)?.callFrame;
    let area = frame === undefined ? 'other' : areaOf(frame.url, frame.functionName);
    if (area === '') {
      const up = tree.parent.get(id);
      area = up === undefined || up === tree.rootId ? 'native (no JS caller)' : areaOfNode(up);
      if (frame !== undefined && !area.startsWith('native')) area = `${area}`;
    }
    areaMemo.set(id, area);
    return area;
  };

  const selfByFunction = new Map<string, { name: string; where: string; us: number }>();
  const selfByArea = new Map<string, number>();
  for (const [id, us] of tree.selfUs) {
    const frame = tree.byId.get(id)?.callFrame;
    if (frame === undefined || NON_BUSY.has(frame.functionName) || us === 0) continue;
    const where = frame.url === '' ? 'native' : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
    const key = `${frameLabel(frame)}@${where}`;
    const row = selfByFunction.get(key) ?? { name: frameLabel(frame), where, us: 0 };
    row.us += us;
    selfByFunction.set(key, row);
    const area = areaOfNode(id);
    selfByArea.set(area, (selfByArea.get(area) ?? 0) + us);
  }
  const top = [...selfByFunction.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, 25)
    .map((r) => ({ name: r.name, where: r.where, selfUs: r.us, percent: (100 * r.us) / busyUs }));
  const areas = [...selfByArea.entries()].sort((a, b) => b[1] - a[1]).map(([area, us]) => ({ area, selfUs: us, percent: (100 * us) / busyUs }));

  // Flame graph of busy time: root at the bottom, idle left out.
  const width = 1600;
  const rowH = 16;
  const minUs = busyUs * 0.001;
  const rects: string[] = [];
  let maxDepth = 0;
  const place = (id: number, x: number, depth: number): void => {
    const node = tree.byId.get(id);
    if (node === undefined) return;
    let cx = x;
    const children = [...(node.children ?? [])].filter((c) => !NON_BUSY.has(tree.byId.get(c)?.callFrame.functionName ?? '') && (tree.totalUs.get(c) ?? 0) >= minUs);
    children.sort((a, b) => frameLabel(tree.byId.get(a)!.callFrame).localeCompare(frameLabel(tree.byId.get(b)!.callFrame)));
    for (const child of children) {
      const us = tree.totalUs.get(child) ?? 0;
      const frame = tree.byId.get(child)!.callFrame;
      const w = (us / busyUs) * width;
      maxDepth = Math.max(maxDepth, depth + 1);
      const where = frame.url === '' ? 'native' : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
      const label = frameLabel(frame);
      const pct = ((100 * us) / busyUs).toFixed(2);
      const text = w > 40 ? `<text x="${(cx + 3).toFixed(1)}" y="${0}" >${escapeXml(label.slice(0, Math.floor(w / 7)))}</text>` : '';
      rects.push(`${depth + 1}|<g><title>${escapeXml(`${label} ${where} — ${pct} % of busy`)}</title><rect x="${cx.toFixed(1)}" y="Y" width="${Math.max(0.5, w - 0.5).toFixed(1)}" height="${rowH - 1}" fill="${colour(areaOfNode(child))}"/>${text}</g>`);
      place(child, cx, depth + 1);
      cx += w;
    }
  };
  place(tree.rootId, 0, 0);
  const headH = 44;
  const height = headH + (maxDepth + 1) * rowH;
  const body = rects.map((entry) => {
    const bar = entry.indexOf('|');
    const depth = Number(entry.slice(0, bar));
    const y = height - depth * rowH;
    return entry.slice(bar + 1).replace('y="Y"', `y="${y}"`).replace(' y="0" ', ` y="${y + rowH - 4}" `);
  });
  const legend = ['ours', 'protobuf', 'grpc-js', 'fastify', 'node', 'GC', 'prom-client', 'other']
    .map((name, i) => `<rect x="${10 + i * 110}" y="26" width="10" height="10" fill="${colour(name === 'other' ? 'x' : name)}"/><text x="${24 + i * 110}" y="35">${name}</text>`)
    .join('');
  const svg =
    `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="monospace" font-size="11">` +
    `<rect width="100%" height="100%" fill="#fff"/><text x="10" y="16" font-size="13">${escapeXml(title)} — busy ${(busyUs / 1000).toFixed(0)} ms of ${(totalUs / 1000).toFixed(0)} ms sampled; width = share of busy time</text>${legend}\n` +
    body.join('\n') +
    '\n</svg>\n';
  return { svg, samples: tree.sampleCount, busyUs, totalUs, top, areas };
}
