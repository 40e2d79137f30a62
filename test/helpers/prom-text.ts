// A strict reader of the Prometheus text exposition format 0.0.4, as a
// scraper parses it: every line must parse, each family has one HELP and one
// TYPE line before its samples, a family's lines are contiguous, no series
// is repeated, and a histogram's buckets are cumulative with +Inf = _count.

export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface PromFamily {
  readonly name: string;
  help?: string;
  type?: string;
  readonly samples: PromSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(text: string, line: number): number {
  // As Go's strconv.ParseFloat reads them (Prometheus): case-insensitive.
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new Error(`line ${line}: bad value ${JSON.stringify(text)}`);
  return Number(text);
}

function unescapeHelp(text: string, line: number): string {
  return text.replace(/\\(.?)/g, (_m, c: string) => {
    if (c === '\\') return '\\';
    if (c === 'n') return '\n';
    throw new Error(`line ${line}: bad escape in HELP: \\${c}`);
  });
}

/** The family a sample name belongs to, given the families declared so far (histogram and summary suffixes). */
function familyOf(name: string, families: Map<string, PromFamily>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      const family = families.get(base);
      if (family !== undefined && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) return base;
    }
  }
  return name;
}

/** Parses `text` strictly; throws on the first thing a scraper would refuse (or a Prometheus server would drop). */
export function parsePromText(text: string): Map<string, PromFamily> {
  const families = new Map<string, PromFamily>();
  const closed = new Set<string>();
  let current: string | undefined;
  const seen = new Set<string>();
  const enter = (name: string, line: number): PromFamily => {
    if (current !== name) {
      if (closed.has(name)) throw new Error(`line ${line}: family ${name} is split (its lines are not contiguous)`);
      if (current !== undefined) closed.add(current);
      current = name;
    }
    let family = families.get(name);
    if (family === undefined) families.set(name, (family = { name, samples: [] }));
    return family;
  };
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const m = /^#[ \t]+(HELP|TYPE)[ \t]+([^ \t]+)(?:[ \t](.*))?$/.exec(raw);
      if (m === null) return; // a comment
      const [, kind, name, rest = ''] = m;
      if (METRIC_NAME.exec(name)?.[0] !== name) throw new Error(`line ${line}: bad metric name ${JSON.stringify(name)}`);
      const family = enter(name, line);
      if (kind === 'HELP') {
        if (family.help !== undefined) throw new Error(`line ${line}: second HELP for ${name}`);
        family.help = unescapeHelp(rest, line);
      } else {
        if (family.type !== undefined) throw new Error(`line ${line}: second TYPE for ${name}`);
        if (family.samples.length > 0) throw new Error(`line ${line}: TYPE for ${name} after its samples`);
        if (!TYPES.has(rest.trim())) throw new Error(`line ${line}: bad type ${JSON.stringify(rest)}`);
        family.type = rest.trim();
      }
      return;
    }
    let pos = 0;
    const name = METRIC_NAME.exec(raw)?.[0];
    if (name === undefined) throw new Error(`line ${line}: no metric name: ${JSON.stringify(raw)}`);
    pos = name.length;
    const labels: Record<string, string> = {};
    if (raw[pos] === '{') {
      pos++;
      while (raw[pos] !== '}') {
        const labelName = LABEL_NAME.exec(raw.slice(pos))?.[0];
        if (labelName === undefined) throw new Error(`line ${line}: bad label name at ${pos}: ${JSON.stringify(raw)}`);
        pos += labelName.length;
        if (raw[pos] !== '=' || raw[pos + 1] !== '"') throw new Error(`line ${line}: expected =" at ${pos}: ${JSON.stringify(raw)}`);
        pos += 2;
        let value = '';
        for (;;) {
          const c = raw[pos];
          if (c === undefined) throw new Error(`line ${line}: unterminated label value: ${JSON.stringify(raw)}`);
          pos++;
          if (c === '"') break;
          if (c === '\\') {
            const e = raw[pos++];
            if (e === '\\') value += '\\';
            else if (e === '"') value += '"';
            else if (e === 'n') value += '\n';
            else throw new Error(`line ${line}: bad escape \\${e} in label value: ${JSON.stringify(raw)}`);
          } else value += c;
        }
        if (Object.hasOwn(labels, labelName)) throw new Error(`line ${line}: label ${labelName} twice`);
        labels[labelName] = value;
        if (raw[pos] === ',') pos++;
        else if (raw[pos] !== '}') throw new Error(`line ${line}: expected , or } at ${pos}: ${JSON.stringify(raw)}`);
      }
      pos++;
    }
    if (raw[pos] !== ' ') throw new Error(`line ${line}: expected a space before the value: ${JSON.stringify(raw)}`);
    const rest = raw.slice(pos + 1).split(' ');
    if (rest.length > 2 || (rest.length === 2 && !/^-?\d+$/.test(rest[1]))) throw new Error(`line ${line}: bad value/timestamp: ${JSON.stringify(raw)}`);
    const value = parseValue(rest[0], line);
    const familyName = familyOf(name, families);
    const family = enter(familyName, line);
    if (family.type === undefined || family.help === undefined) throw new Error(`line ${line}: sample of ${familyName} before its HELP and TYPE`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)))}`;
    if (seen.has(key)) throw new Error(`line ${line}: series repeated: ${raw}`);
    seen.add(key);
    family.samples.push({ name, labels, value });
  });
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

function checkHistogram(family: PromFamily): void {
  const groups = new Map<string, { buckets: [number, number][]; count?: number; sum?: number }>();
  for (const s of family.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort(([a], [b]) => (a < b ? -1 : 1)));
    let g = groups.get(key);
    if (g === undefined) groups.set(key, (g = { buckets: [] }));
    if (s.name === `${family.name}_bucket`) {
      if (le === undefined) throw new Error(`${family.name}: a bucket without le`);
      g.buckets.push([parseValue(le, 0), s.value]);
    } else if (s.name === `${family.name}_count`) g.count = s.value;
    else if (s.name === `${family.name}_sum`) g.sum = s.value;
    else throw new Error(`${family.name}: stray sample ${s.name}`);
  }
  for (const [key, g] of groups) {
    const sorted = [...g.buckets].sort((a, b) => a[0] - b[0]);
    if (sorted.at(-1)?.[0] !== Infinity) throw new Error(`${family.name}${key}: no +Inf bucket`);
    for (let i = 1; i < sorted.length; i++) if (sorted[i][1] < sorted[i - 1][1]) throw new Error(`${family.name}${key}: buckets not cumulative at le=${sorted[i][0]}`);
    if (g.count === undefined || g.sum === undefined) throw new Error(`${family.name}${key}: _count or _sum missing`);
    if (sorted.at(-1)?.[1] !== g.count) throw new Error(`${family.name}${key}: +Inf bucket ${sorted.at(-1)?.[1]} != _count ${g.count}`);
  }
}

/** The value of one series (exact labels), or undefined. */
export function sampleOf(families: Map<string, PromFamily>, name: string, labels: Readonly<Record<string, string>>): number | undefined {
  for (const family of families.values()) {
    for (const s of family.samples) {
      if (s.name !== name) continue;
      const keys = Object.keys(s.labels);
      if (keys.length === Object.keys(labels).length && keys.every((k) => s.labels[k] === labels[k])) return s.value;
    }
  }
  return undefined;
}

/** Every counter and histogram sample of a scrape, by series: what must never go down from one scrape to the next. */
export function monotoneSamples(families: Map<string, PromFamily>): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of families.values()) {
    if (f.type !== 'counter' && f.type !== 'histogram') continue;
    for (const s of f.samples) out.set(`${s.name}${JSON.stringify(Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : 1)))}`, s.value);
  }
  return out;
}
