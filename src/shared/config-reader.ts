// Small typed reader over a parsed YAML/JSON tree. Every problem is recorded
// with its path, what was expected and what was found, so one run of a
// validator reports all mistakes in a config at once.
import { resolve as resolvePath } from 'node:path';

/**
 * Why a config file could not be read, for its ConfigError: the absolute path tried (a relative one is read from the
 * process's working directory, which under systemd is `/`), and what the error code means in words.
 */
export function unreadableFileProblem(file: string, err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const where = resolvePath(file);
  if (code === 'ENOENT') return `cannot read the file: ENOENT (no such file: ${where})`;
  if (code === 'EACCES') return `cannot read the file: EACCES (${where} is not readable by this process's user)`;
  if (code === 'EISDIR') return `cannot read the file: EISDIR (${where} is a directory)`;
  return `cannot read the file ${where}: ${code ?? (err as Error).message}`;
}

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: readonly string[]) {
    super(`invalid config ${source}:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Plain = Record<string, unknown>;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
  if (typeof value === 'object') return 'a mapping';
  return `${typeof value} ${String(value)}`;
}

/** `text` with all between its scheme and its last `@` masked: a URL that failed to parse may still hold credentials there. */
function withoutUserinfo(text: string): string {
  const at = text.lastIndexOf('@');
  if (at < 0) return text;
  const scheme = /^[a-z][a-z0-9+.-]*:[/\\]*/i.exec(text)?.[0] ?? '';
  return scheme.length > at ? text : `${scheme}…${text.slice(at)}`;
}

export class ConfigReader {
  readonly problems: string[] = [];

  problem(path: string, expected: string, found: unknown): void {
    this.problems.push(`${path}: expected ${expected}, found ${found === undefined ? 'nothing' : describe(found)}`);
  }

  /** Reports keys of `obj` not in `known` (typos would otherwise be silently ignored). */
  noUnknownKeys(path: string, obj: Plain, known: readonly string[]): void {
    for (const key of Object.keys(obj)) {
      if (!known.includes(key)) this.problems.push(`${path}.${key}: unknown key (known: ${known.join(', ')})`);
    }
  }

  object(path: string, value: unknown, optional = false): Plain | undefined {
    if (value === undefined && optional) return undefined;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      this.problem(path, 'a mapping', value);
      return undefined;
    }
    return value as Plain;
  }

  list(path: string, value: unknown, optional = false): unknown[] {
    if (value === undefined && optional) return [];
    if (!Array.isArray(value)) {
      this.problem(path, 'a list', value);
      return [];
    }
    return value;
  }

  string(path: string, value: unknown, fallback?: string): string {
    if (value === undefined && fallback !== undefined) return fallback;
    if (typeof value !== 'string' || value.length === 0) {
      this.problem(path, 'a non-empty string', value);
      return fallback ?? '';
    }
    return value;
  }

  /** Like string(), but a problem never repeats the value: it is a credential (a YAML number is still one). */
  secret(path: string, value: unknown): string {
    if (typeof value !== 'string' || value.length === 0) {
      this.problems.push(`${path}: expected a non-empty string (value not shown: it is a secret)`);
      return '';
    }
    return value;
  }

  optionalString(path: string, value: unknown): string | undefined {
    if (value === undefined) return undefined;
    return this.string(path, value);
  }

  integer(path: string, value: unknown, min: number, max: number, fallback?: number): number {
    if (value === undefined && fallback !== undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      this.problem(path, `an integer from ${min} to ${max}`, value);
      return fallback ?? min;
    }
    return value;
  }

  optionalInteger(path: string, value: unknown, min: number, max: number): number | undefined {
    if (value === undefined) return undefined;
    return this.integer(path, value, min, max);
  }

  boolean(path: string, value: unknown, fallback: boolean): boolean {
    if (value === undefined) return fallback;
    if (typeof value !== 'boolean') {
      this.problem(path, 'true or false', value);
      return fallback;
    }
    return value;
  }

  oneOf<T extends string>(path: string, value: unknown, allowed: readonly T[], fallback?: T): T {
    if (value === undefined && fallback !== undefined) return fallback;
    if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
      this.problem(path, `one of ${allowed.join(' | ')}`, value);
      return fallback ?? allowed[0];
    }
    return value as T;
  }

  url(path: string, value: unknown): string {
    const text = this.string(path, value);
    if (text === '') return text;
    let parsed: URL | undefined;
    try {
      parsed = new URL(text);
    } catch {
      parsed = undefined;
    }
    // Shown without its user:password@: the problem reaches logs and the admin API (an agent's refresh_config answer).
    if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) this.problem(path, 'an http(s) URL', withoutUserinfo(text));
    return text;
  }

  throwIfProblems(source: string): void {
    if (this.problems.length > 0) throw new ConfigError(source, this.problems);
  }
}

/**
 * A config refresh names an entry by its id in brackets (nodes[gpu-1].labels): an id holding '[' or ']' would
 * make every change to its entry unclassifiable (refused as needing a restart), so such ids are refused here.
 */
export function noBrackets(r: ConfigReader, path: string, id: string): void {
  if (/[[\]]/.test(id)) r.problems.push(`${path}: ${JSON.stringify(id)} holds '[' or ']', which a config refresh uses to name entries; pick another`);
}

/** The edge's cap on a node id: it goes out in every answer the node serves, and clients' header limits refuse a huge one. */
export const MAX_NODE_ID_CHARS = 256;

/**
 * A node's or provider's id, read alike by the edge's config and the agent's
 * (an id only one side accepts never matches: the agent is refused at every
 * reconnect, or its provider never gets a request). Every answer names them in
 * its x-edge-node and x-edge-provider headers, written unchecked on the hot
 * path, so an id a header cannot carry is refused here.
 */
export function headerSafeId(r: ConfigReader, path: string, value: unknown, maxChars: number, why: string): string {
  const id = r.string(path, value);
  const odd = /[^\x20-\x7e]/u.exec(id);
  // Named by its code point: printed as is, a look-alike pasted from a web page ("gpu‑1" with U+2011) reads as the id it imitates.
  if (odd !== null) r.problems.push(`${path}: expected printable ASCII (it is sent in the x-edge-node and x-edge-provider response headers), found ${describe(id)}, with U+${(odd[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')} at character ${odd.index + 1}`);
  else noBrackets(r, path, id);
  // A URL normalises a dot segment away: /admin/nodes/../drain and the bootstrap listener's node paths could never name it.
  if (id === '.' || id === '..') r.problems.push(`${path}: ${JSON.stringify(id)} is a dot segment; admin and bootstrap URLs cannot name it`);
  if (id.length > maxChars) r.problems.push(`${path}: ${id.length} characters; at most ${maxChars} (${why})`);
  return id;
}

/**
 * How config files are parsed: the parser's warnings are not printed. It
 * emits them as process warnings (stderr, the journal) quoting the whole
 * source line, and an unresolved tag (`token: !abc…`) is the secret's line;
 * the value it leaves (empty) is refused by the config's own checks.
 */
export const YAML_PARSE_OPTIONS = { logLevel: 'error' } as const;

/**
 * A YAML syntax error as one line that quotes nothing of the file. The first
 * line of the parser's message may still quote the offending value itself
 * (`Unresolved alias …: <name>`, `Block scalar header includes extra
 * characters: |<text>`, `Not a valid tag: <tag>`, `Invalid escape sequence \U<8 characters>`), and on a token or api_key
 * line that is the secret: only the description before such a quote is kept,
 * with the position.
 */
export function yamlSyntaxProblem(err: unknown): string {
  const first = (err as Error).message.split('\n')[0];
  const at = / at line (\d+), column (\d+):?$/.exec(first);
  let text = at === null ? first : first.slice(0, at.index);
  const colon = text.indexOf(': ');
  if (colon >= 0) text = text.slice(0, colon);
  // `Invalid escape sequence \Uxxxxxxxx` quotes up to 8 characters of the value after its backslash, unquoted.
  if ((err as { code?: unknown }).code === 'BAD_DQ_ESCAPE') text = 'Invalid escape sequence';
  text = text.replace(/"[^"]*"/g, '(value not shown)');
  return `not valid YAML: ${text}${at === null ? '' : ` at line ${at[1]}, column ${at[2]}`}`;
}
