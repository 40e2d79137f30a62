#!/usr/bin/env node
// edge --config FILE [--pretty] | edge check-config FILE | --help | --version
import { parseArgs } from 'node:util';
import { ConfigError } from '../shared/config-reader.js';
import { exitOnFault } from '../shared/fatal.js';
import { createLogger, logLevelEnvProblem } from '../shared/logger.js';
import { VERSION } from '../shared/version.js';
import { applyNodeFlags, runningNodeFlags } from '../shared/node-flags.js';
import { releaseHeldSignal } from '../shared/node-check.js';
import { configAdvice, loadEdgeConfig } from '../main/config.js';
import { expiredTokenAdvice } from '../main/bootstrap/bootstrap-server.js';
import { StartError } from '../shared/start-error.js';
import { startEdge, type RunningEdge } from './edge.js';

const HELP = `usage:
  edge --config FILE [--pretty]   run the edge gateway
  edge check-config FILE          validate a config file and the files it names (TLS, bootstrap); exit 0 = valid, 1 = invalid
  edge hash-key [KEY]             print sha256(KEY) for auth.api_keys[].key_sha256 (KEY from stdin if omitted)
  edge --help | --version

options:
  -c, --config FILE   the edge's YAML config
      --pretty        human-readable logs instead of JSON lines (also NODE_ENV=development)
  -h, --help          show this help
  -v, --version       print the version

signals:
  SIGHUP              re-read FILE and apply it (config refresh); the result is logged
  SIGTERM, SIGINT     drain: no new connections or requests, open ones finish within
                      drain.grace_ms, then exit 0; a second one of either kind exits at once (1)

The admin API and /metrics listen on admin.host:admin.port (default 127.0.0.1:9090).`;


async function main(): Promise<number> {
  let values: { config?: string; help?: boolean; version?: boolean; pretty?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      allowPositionals: true,
      options: {
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
        pretty: { type: 'boolean' },
      },
    }));
  } catch (err) {
    console.error(`edge: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (values.version) {
    console.log(VERSION);
    return 0;
  }
  if (positionals[0] === 'hash-key') {
    // A key with a space passed unquoted would otherwise be hashed as its first word alone.
    if (positionals.length > 2) {
      console.error(`edge hash-key: one KEY (got ${positionals.length - 1} arguments; quote a key with spaces, or pass it on stdin)`);
      return 2;
    }
    return (await import('./hash-key.js')).runHashKey(positionals[1]);
  }
  if (positionals[0] === 'check-config') {
    const file = positionals[1] ?? values.config;
    // Which file was checked must never be a guess: one FILE, given once.
    if (!file || positionals.length > 2 || (positionals[1] !== undefined && values.config !== undefined)) {
      console.error(`edge check-config: one FILE\n\n${HELP}`);
      return 2;
    }
    const config = await loadEdgeConfig(file);
    const problems = await (await import('./check-config.js')).checkConfigFiles(config);
    if (problems.length > 0) {
      console.error(`${file}: the files it names are not usable:\n${problems.map((p) => `  ${p}`).join('\n')}`);
      return 1;
    }
    for (const advice of configAdvice(config)) console.error(`${file}: warning: ${advice}`);
    // What the started edge warns of, said before a restart makes it true: valid, yet every bootstrap request refused.
    const expired = expiredTokenAdvice(config.bootstrap?.tokenExpiresAt);
    if (expired !== undefined) console.error(`${file}: warning: ${expired}`);
    const admin = config.admin === undefined ? 'off' : `${config.admin.host}:${config.admin.port}${config.admin.token ? ' (token)' : ''}`;
    console.log(`${file}: valid (${config.nodes.length} nodes, ${config.models.length} models; admin ${admin})`);
    return 0;
  }
  if (!values.config || positionals.length > 0) {
    console.error(HELP);
    return 2;
  }
  const file = values.config;
  const levelProblem = logLevelEnvProblem(process.env.LOG_LEVEL);
  if (levelProblem !== undefined) {
    console.error(levelProblem);
    return 2;
  }
  const logger = createLogger('edge', undefined, values.pretty === true ? { pretty: true } : {});
  exitOnFault(logger, 'edge');
  const config = await loadEdgeConfig(file);
  // Heap and GC-thread sizes only apply to a process started with them: restart in place once (nothing is open yet).
  const notApplied = applyNodeFlags(config.runtime?.nodeFlags ?? []);
  if (notApplied !== undefined) logger.warn(notApplied, 'runtime.node_flags: running without them');
  // After the restart: the process that restarts itself would say it a second time.
  for (const advice of configAdvice(config)) logger.warn({ config: file }, advice);
  // Handlers go in before anything listens: a signal during start is not lost.
  let edge: RunningEdge | undefined;
  let reloadAfterStart = false;
  const reload = (running: RunningEdge): void => {
    logger.info({ config: file }, 'SIGHUP: reloading the config file');
    // The refresher logs the outcome (applied, unchanged or rejected with reasons); a refresh that throws is logged, never fatal.
    running.refresh({ mode: 'apply', origin: 'SIGHUP' }).catch((err: unknown) => logger.error({ err }, 'SIGHUP: the config reload failed; the running config stays'));
  };
  const onHup = (): void => {
    if (edge !== undefined) {
      reload(edge);
      return;
    }
    // Starting: the file may have changed after it was read, so it is read again once the edge runs.
    logger.info({ config: file }, 'SIGHUP while starting: the config file is re-read once the edge has started');
    reloadAfterStart = true;
  };
  process.on('SIGHUP', onHup);
  // A SIGHUP the installed command held while this module graph and the config
  // loaded (released only now that the handler above is in: never left to its default).
  if (releaseHeldSignal('SIGHUP')) onHup();
  // One handler for both signals, kept for the process's life: the first
  // signal of either kind starts the drain, any later one (same kind or the
  // other) ends it at once. Never a per-kind once-listener, whose order
  // against the other kind's would decide what a second signal does.
  let draining = false;
  const onStopSignal = (signal: NodeJS.Signals): void => {
    if (draining) {
      logger.warn({ signal }, 'second stop signal during the drain: exiting now');
      process.exit(1);
    }
    draining = true;
    logger.info({ signal }, 'shutting down');
    if (edge === undefined) process.exit(0); // nothing open yet
    edge.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onStopSignal);
  process.on('SIGINT', onStopSignal);
  edge = await startEdge(config, { logger, admin: true, configFile: file });
  logger.info({ version: VERSION, config: file, pid: process.pid, nodeFlags: runningNodeFlags() }, 'edge started');
  if (reloadAfterStart && !draining) reload(edge);
  return -1; // keep running
}

main().then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    // The operator's to fix (a config mistake, a port in use, a file it cannot read): the message names the key.
    if (err instanceof ConfigError || err instanceof StartError) console.error(err.message);
    else console.error(err);
    process.exit(1);
  },
);
