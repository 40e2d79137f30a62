// node-agent bootstrap --edge URL --node-id ID --token T --dir D: fetches
// this node's artifacts from the edge's bootstrap listener (the agent
// tarball, the rendered agent config, their SHA256SUMS), checks each
// against its sum, and only when every one matches writes them into D
// (agent.tgz, agent.yaml readable by its owner only: it holds the node
// token, SHA256SUMS). A file is written to a temporary name and renamed, so
// D never holds a half-written artifact. Nothing is written on any failure.
import { createHash } from 'node:crypto';
import { randomBytes } from 'node:crypto';
import type { Stats } from 'node:fs';
import { chmod, lstat, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export interface BootstrapOptions {
  /** The bootstrap listener, e.g. http://edge.example:8443 */
  readonly edge: string;
  readonly nodeId: string;
  readonly token: string;
  readonly dir: string;
  /** Per request; default 60 s (the tarball is a few MB). */
  readonly timeoutMs?: number;
}

export interface BootstrapOutcome {
  readonly dir: string;
  readonly files: readonly { readonly name: string; readonly bytes: number; readonly sha256: string }[];
}

export class BootstrapError extends Error {}

const ARTIFACTS = ['agent.tgz', 'agent.yaml'] as const;

export async function bootstrapNode(options: BootstrapOptions): Promise<BootstrapOutcome> {
  let base: URL;
  try {
    base = new URL(options.edge.endsWith('/') ? options.edge : `${options.edge}/`);
  } catch {
    throw new BootstrapError(`--edge: not a URL: ${options.edge}`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new BootstrapError(`--edge: expected an http(s) URL, got ${base.protocol}`);
  const get = (path: string) => fetchBytes(new URL(path, base), options.token, options.timeoutMs ?? 60_000);
  const nodePath = `bootstrap/v1/nodes/${encodeURIComponent(options.nodeId)}/`;
  const sums = parseSums((await get(`${nodePath}SHA256SUMS`)).toString('utf8'));
  const fetched = await Promise.all([get('bootstrap/v1/agent.tgz'), get(`${nodePath}agent.yaml`)]);
  const files = ARTIFACTS.map((name, i) => {
    const bytes = fetched[i];
    const expected = sums.get(name);
    if (expected === undefined) throw new BootstrapError(`SHA256SUMS has no line for ${name}`);
    const actual = createHash('sha256').update(bytes).digest('hex');
    if (actual !== expected) throw new BootstrapError(`${name}: sha256 ${actual} does not match SHA256SUMS (${expected}); nothing written`);
    return { name, bytes, sha256: actual };
  });
  const dir = resolve(options.dir);
  const writes = [
    ...files.map(({ name, bytes }) => ({ name, bytes, mode: name === 'agent.yaml' ? 0o600 : 0o644 })),
    { name: 'SHA256SUMS', bytes: Buffer.from(files.map((f) => `${f.sha256}  ${f.name}\n`).join('')), mode: 0o644 },
  ];
  // Every file is written in full, and every name checked, before any is renamed into place: a failure
  // part-way (a full disk, a name taken by a directory) must not leave a new agent.tgz beside an old agent.yaml.
  const staged: (string | undefined)[] = [];
  try {
    await mkdir(dir, { recursive: true });
    for (const { name, bytes, mode } of writes) {
      if ((await lstatIfAny(join(dir, name)))?.isDirectory() === true) throw new Error(`${join(dir, name)} is a directory`);
      staged.push(await writeTemporary(join(dir, name), bytes, mode));
    }
    for (const [i, { name }] of writes.entries()) {
      await rename(staged[i] as string, join(dir, name));
      staged[i] = undefined;
    }
  } catch (err) {
    await Promise.all(staged.map((temporary) => (temporary === undefined ? undefined : rm(temporary, { force: true }))));
    // A directory that cannot take the files is the operator's to fix: the reason, not a stack trace.
    throw new BootstrapError(`--dir ${dir}: ${(err as Error).message}`);
  }
  return { dir, files: files.map(({ name, bytes, sha256 }) => ({ name, bytes: bytes.length, sha256 })) };
}

async function fetchBytes(url: URL, token: string, timeoutMs: number): Promise<Buffer> {
  let response: Response;
  let body: Buffer;
  try {
    response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
    // Inside the try: a body cut short or too slow fails here, after the headers came.
    body = Buffer.from(await response.arrayBuffer());
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new BootstrapError(`GET ${url.pathname}: ${cause}`);
  }
  if (!response.ok) {
    let detail = body.toString('utf8').slice(0, 300);
    try {
      detail = (JSON.parse(detail) as { error: { message: string } }).error.message;
    } catch {
      // not the listener's JSON error: show the start of the body as it is
    }
    throw new BootstrapError(`GET ${url.pathname}: HTTP ${response.status}: ${detail}`);
  }
  return body;
}

function parseSums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line.trim());
    if (match !== null) sums.set(match[2], match[1]);
  }
  return sums;
}

/**
 * The file's bytes under a temporary name beside `path`, for the caller to
 * rename into place: created new ('wx': never an existing file, never
 * through a symlink) under a name no one can guess: in a directory others
 * may write to, a planted file or link at a predictable name would receive
 * the node's token.
 */
async function writeTemporary(path: string, bytes: Buffer, mode: number): Promise<string> {
  const temporary = `${path}.partial-${randomBytes(8).toString('hex')}`;
  try {
    await writeFile(temporary, bytes, { mode, flag: 'wx' });
  } catch (err) {
    // Created and cut short (a full disk): ours to remove. EEXIST: not ours, left alone.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') await rm(temporary, { force: true });
    throw err;
  }
  try {
    await chmod(temporary, mode);
  } catch (err) {
    await rm(temporary, { force: true });
    throw err;
  }
  return temporary;
}

async function lstatIfAny(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
