#!/usr/bin/env node
// edge --config FILE | edge check-config FILE | --help | --version
import { parseArgs } from 'node:util';
import { ConfigError } from '../shared/config-reader.js';
import { createLogger } from '../shared/logger.js';
import { VERSION } from '../shared/version.js';
import { loadEdgeConfig } from './config.js';
import { startEdge } from './edge.js';

const HELP = `usage:
  edge --config FILE          run the edge gateway
  edge check-config FILE      validate a config file and exit (0 = valid)
  edge --help | --version`;

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (values.version) {
    console.log(VERSION);
    return 0;
  }
  if (positionals[0] === 'check-config') {
    const file = positionals[1] ?? values.config;
    if (!file) {
      console.error(HELP);
      return 2;
    }
    const config = await loadEdgeConfig(file);
    console.log(`${file}: valid (${config.nodes.length} nodes, ${config.models.length} models)`);
    return 0;
  }
  if (!values.config || positionals.length > 0) {
    console.error(HELP);
    return 2;
  }
  const logger = createLogger('edge');
  const edge = await startEdge(await loadEdgeConfig(values.config), { logger });
  const shutdown = (signal: string): void => {
    logger.info({ signal }, 'shutting down');
    edge.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
  return -1; // keep running
}

main().then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof ConfigError) console.error(err.message);
    else console.error(err);
    process.exit(1);
  },
);
