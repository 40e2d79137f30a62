// A piscina task: one config text parsed and validated off the main thread
// (config-parse.ts says why). The answer is plain data: the EdgeConfig,
// which crosses threads as the I/O workers' copies do, or the problems.
import { ConfigError } from '../../shared/config-reader.js';
import type { EdgeConfig } from '../../shared/config-types.js';
import { parseEdgeConfigText } from '../config.js';

export interface ConfigParseTask {
  readonly text: string;
  readonly source: string;
}

export type ConfigParseReply = { readonly config: EdgeConfig } | { readonly problems: readonly string[] } | { readonly error: string };

export default function parseConfigTask({ text, source }: ConfigParseTask): ConfigParseReply {
  try {
    return { config: parseEdgeConfigText(text, source) };
  } catch (err) {
    return err instanceof ConfigError ? { problems: err.problems } : { error: (err as Error).message };
  }
}
