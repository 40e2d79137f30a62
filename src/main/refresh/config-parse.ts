// Parsing a refresh's config text off the main thread. The YAML parser
// takes about 2 µs a byte here: a 4.7 MB config held the main thread (the
// scheduler, and with workers.count 0 every client connection) for ~11 s,
// on every SIGHUP. Texts of OFFLOAD_BYTES and more are parsed and
// validated in a one-thread piscina pool; the main thread only receives
// the result (a structured clone, ~1/50 of the parse). Smaller ones parse
// inline, where a thread's start would cost more than it saves.
import { Piscina } from 'piscina';
import { ConfigError } from '../../shared/config-reader.js';
import type { EdgeConfig } from '../../shared/config-types.js';
import { parseEdgeConfigText } from '../config.js';
import type { ConfigParseReply, ConfigParseTask } from './config-parse-task.js';

const TASK_FILE = new URL('./config-parse-task.js', import.meta.url).href;
/** ~30 ms of parsing on the main thread: below it, inline. */
export const OFFLOAD_BYTES = 16 * 1024;
/** Refreshes are rare: the thread exits soon after one. */
const IDLE_TIMEOUT_MS = 5_000;

export class ConfigParser {
  #pool: Piscina | undefined;
  #closed = false;
  /** Texts parsed in the pool (tests, status). */
  offloaded = 0;

  /** The text's EdgeConfig; throws ConfigError with every problem, as parseEdgeConfigText does. */
  async parse(text: string, source: string): Promise<EdgeConfig> {
    if (text.length < OFFLOAD_BYTES || this.#closed) return parseEdgeConfigText(text, source);
    this.#pool ??= new Piscina({ filename: TASK_FILE, minThreads: 0, maxThreads: 1, idleTimeout: IDLE_TIMEOUT_MS });
    const task: ConfigParseTask = { text, source };
    const reply = (await this.#pool.run(task)) as ConfigParseReply;
    this.offloaded++;
    if ('config' in reply) return reply.config;
    if ('problems' in reply) throw new ConfigError(source, reply.problems);
    throw new Error(reply.error);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.destroy();
  }
}
