// The settings of a `type: cli` provider: which program the agent runs per
// request (an argv array, never a shell), how the prompt reaches it (an
// argument or stdin), where it runs (a per-session directory under a root),
// what environment it sees (an allow-list, nothing inherited otherwise) and
// the bounds on its time and output. Parsed with the rest of the agent's
// config so every mistake is reported with its path.
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import type { ConfigReader } from '../shared/config-reader.js';

export type CliInput = 'stdin' | 'arg';
export type CliPrompt = 'last_user' | 'messages_json';

export interface CliProviderConfig {
  /** argv: the program and its fixed leading arguments; run without a shell. */
  readonly command: readonly string[];
  /** Appended to `command`; `{prompt}`, `{model}` and `{session}` are replaced in each. */
  readonly args: readonly string[];
  /** Used instead of `args` when the session's directory already existed (a later turn). */
  readonly resumeArgs: readonly string[] | undefined;
  readonly input: CliInput;
  readonly prompt: CliPrompt;
  /** Absolute; each session runs in a directory directly under it. */
  readonly cwdRoot: string;
  /** The child's whole environment: name -> value (passed-through names resolved at spawn). */
  readonly env: readonly CliEnvEntry[];
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  /** After SIGTERM, how long before the process group gets SIGKILL. */
  readonly killGraceMs: number;
  /** How long a request waits for its session's running process before giving up. */
  readonly sessionWaitMs: number;
  /** A session directory no run used this long is removed (0 = kept for good). */
  readonly sessionTtlMs: number;
}

/** `NAME` passes the agent's own value through (when it has one); `NAME=value` sets it. */
export interface CliEnvEntry {
  readonly name: string;
  readonly value: string | undefined;
}

export const CLI_KEYS: readonly string[] = [
  'command', 'args', 'resume_args', 'input', 'prompt', 'cwd_root', 'env', 'timeout_ms', 'max_output_bytes', 'kill_grace_ms', 'session_wait_ms', 'session_ttl_ms',
];

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PLACEHOLDER = /\{(\w+)\}/g;
const KNOWN_PLACEHOLDERS: ReadonlySet<string> = new Set(['prompt', 'model', 'session']);
const HOUR_MS = 3_600_000;

export function readCliProvider(r: ConfigReader, path: string, item: Record<string, unknown>, providerId: string): CliProviderConfig {
  const command = readArgv(r, `${path}.command`, item.command, false, false);
  if (Array.isArray(item.command) && command.length === 0) r.problem(`${path}.command`, 'a non-empty list: the program, then its arguments (no shell)', item.command);
  // spawn() refuses an empty program name: every run would fail.
  else if (command[0] === '') r.problem(`${path}.command[0]`, 'the program: a path or a name on its PATH', command[0]);
  const input = r.oneOf(`${path}.input`, item.input, ['stdin', 'arg'] as const, 'stdin');
  const args = readArgv(r, `${path}.args`, item.args, true);
  const resumeArgs = item.resume_args === undefined ? undefined : readArgv(r, `${path}.resume_args`, item.resume_args, true);
  for (const [key, list] of [['args', args], ['resume_args', resumeArgs ?? []]] as const) {
    const hasPrompt = list.some((a) => a.includes('{prompt}'));
    if (input === 'arg' && !hasPrompt && (key === 'args' || resumeArgs !== undefined)) r.problems.push(`${path}.${key}: input is arg, so it must contain {prompt}`);
    if (input === 'stdin' && hasPrompt) r.problems.push(`${path}.${key}: {prompt} is only for input: arg (the prompt goes on stdin)`);
  }
  const prompt = r.oneOf(`${path}.prompt`, item.prompt, ['last_user', 'messages_json'] as const, 'last_user');
  const cwdRootText = item.cwd_root === undefined ? resolve(tmpdir(), 'edge-cli-sessions', providerId) : r.string(`${path}.cwd_root`, item.cwd_root);
  const env = readEnv(r, `${path}.env`, item.env);
  return {
    command,
    args,
    resumeArgs,
    input,
    prompt,
    cwdRoot: resolve(cwdRootText),
    env,
    timeoutMs: r.integer(`${path}.timeout_ms`, item.timeout_ms, 1, 24 * HOUR_MS, 300_000),
    maxOutputBytes: r.integer(`${path}.max_output_bytes`, item.max_output_bytes, 1, 1024 * 1024 * 1024, 16 * 1024 * 1024),
    killGraceMs: r.integer(`${path}.kill_grace_ms`, item.kill_grace_ms, 0, 60_000, 2_000),
    sessionWaitMs: r.integer(`${path}.session_wait_ms`, item.session_wait_ms, 0, HOUR_MS, 60_000),
    sessionTtlMs: r.integer(`${path}.session_ttl_ms`, item.session_ttl_ms, 0, 365 * 24 * HOUR_MS, 7 * 24 * HOUR_MS),
  };
}

/** `placeholders` false: the list is run as it is (command), so a placeholder there would reach the program literally. */
function readArgv(r: ConfigReader, path: string, value: unknown, optional: boolean, placeholders = true): string[] {
  if (value === undefined && optional) return [];
  const items = r.list(path, value);
  const out: string[] = [];
  for (let i = 0; i < items.length; i++) {
    const arg = items[i];
    if (typeof arg !== 'string' || arg.includes('\0')) {
      r.problem(`${path}[${i}]`, 'a string without NUL', arg);
      continue;
    }
    for (const match of arg.matchAll(PLACEHOLDER)) {
      if (!placeholders && KNOWN_PLACEHOLDERS.has(match[1])) r.problems.push(`${path}[${i}]: ${match[0]} is replaced in args and resume_args only (command is run as it is): move it to args`);
      else if (!KNOWN_PLACEHOLDERS.has(match[1])) r.problems.push(`${path}[${i}]: unknown placeholder ${match[0]} (known: {prompt}, {model}, {session})`);
    }
    out.push(arg);
  }
  return out;
}

function readEnv(r: ConfigReader, path: string, value: unknown): CliEnvEntry[] {
  if (value === undefined) return [];
  const items = r.list(path, value);
  const out: CliEnvEntry[] = [];
  for (let i = 0; i < items.length; i++) {
    const entry = items[i];
    const eq = typeof entry === 'string' ? entry.indexOf('=') : -1;
    const name = typeof entry === 'string' ? (eq < 0 ? entry : entry.slice(0, eq)) : '';
    if (typeof entry !== 'string' || !ENV_NAME.test(name) || entry.includes('\0')) {
      const expected = typeof entry === 'string' && entry.includes('\0') ? 'NAME (passed through from the agent) or NAME=value (no NUL)' : 'NAME (passed through from the agent) or NAME=value';
      // A malformed entry may hold a secret anywhere ('KEY sk-…', a bare token): a string is never shown, only its length.
      if (typeof entry === 'string') r.problems.push(`${path}[${i}]: expected ${expected}, found a string of ${entry.length} characters (not shown: it may hold a secret)`);
      else r.problem(`${path}[${i}]`, expected, entry);
      continue;
    }
    out.push({ name, value: eq < 0 ? undefined : entry.slice(eq + 1) });
  }
  return out;
}

/** The child's environment: only the allow-listed names, never the agent's whole environment. */
export function childEnv(entries: readonly CliEnvEntry[], own: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of entries) {
    const value = entry.value ?? own[entry.name];
    if (value !== undefined) env[entry.name] = value;
  }
  return env;
}

/** Replaces the placeholders in each argument (no shell ever sees them, so no quoting). */
export function expandArgs(template: readonly string[], values: { readonly prompt: string; readonly model: string; readonly session: string }): string[] {
  return template.map((arg) => arg.replace(PLACEHOLDER, (whole, name: string) => (name === 'prompt' ? values.prompt : name === 'model' ? values.model : name === 'session' ? values.session : whole)));
}
