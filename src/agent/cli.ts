#!/usr/bin/env node
// node-agent --config FILE: runs the node agent until SIGTERM or SIGINT, then
// leaves the edge gracefully and exits 0. Logs are pino JSON on stdout.
import { parseArgs } from 'node:util';
import { ConfigError } from '../shared/config-reader.js';
import { applyNodeFlags, runningNodeFlags } from '../shared/node-flags.js';
import { AGENT_VERSION } from './version.js';

const USAGE = `Usage: node-agent --config FILE
       node-agent bootstrap --edge URL --node-id ID --token T [--dir DIR]

Dials the edge, registers this node and runs the provider requests the edge
sends until SIGTERM or SIGINT.

bootstrap fetches this node's agent package and rendered config from the
edge's bootstrap listener, checks their sha256 sums and writes them into
DIR (default: the current directory): agent.tgz, agent.yaml, SHA256SUMS.

Options:
  -c, --config FILE   agent configuration (YAML)
      --pretty        human-readable logs instead of JSON lines (also NODE_ENV=development)
  -h, --help          show this help
  -v, --version       print the version
`;

async function bootstrap(argv: string[]): Promise<number> {
  let values: { edge?: string; 'node-id'?: string; token?: string; dir?: string };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { edge: { type: 'string' }, 'node-id': { type: 'string' }, token: { type: 'string' }, dir: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`node-agent bootstrap: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { edge, token } = values;
  const nodeId = values['node-id'];
  if (edge === undefined || nodeId === undefined || token === undefined) {
    process.stderr.write(`node-agent bootstrap: --edge, --node-id and --token are required\n\n${USAGE}`);
    return 2;
  }
  const { bootstrapNode, BootstrapError } = await import('./bootstrap.js');
  try {
    const outcome = await bootstrapNode({ edge, nodeId, token, dir: values.dir ?? '.' });
    for (const f of outcome.files) process.stdout.write(`${f.sha256}  ${f.name} (${f.bytes} bytes, verified)\n`);
    process.stdout.write(`wrote ${outcome.dir}\nnext: npm install -g --omit=dev ${outcome.dir}/agent.tgz && node-agent --config ${outcome.dir}/agent.yaml\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof BootstrapError)) throw err;
    process.stderr.write(`node-agent bootstrap: ${err.message}\n`);
    return 1;
  }
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'bootstrap') return bootstrap(argv.slice(1));
  let values: { config?: string; help?: boolean; version?: boolean; pretty?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
        pretty: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`node-agent: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help === true) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (values.version === true) {
    process.stdout.write(`${AGENT_VERSION}\n`);
    return 0;
  }
  if (values.config === undefined) {
    process.stderr.write(`node-agent: --config FILE is required\n\n${USAGE}`);
    return 2;
  }

  // Loaded only now: grpc-js, undici, protobuf and yaml cost ~0.4 s of startup that --help and --version do not need.
  const [{ loadAgentConfig }, { NodeAgent }, { createLogger }] = await Promise.all([import('./config.js'), import('./agent.js'), import('../shared/logger.js')]);
  let config;
  try {
    config = await loadAgentConfig(values.config);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`node-agent: ${err.message}\n`);
    return 1;
  }

  // The shared logger: credentials (node token, provider api keys) are redacted.
  const logger = createLogger('node-agent', config.logLevel, values.pretty === true ? { pretty: true } : {});
  // Heap and GC-thread sizes only apply to a process started with them: restart in place once (nothing is open yet).
  const notApplied = applyNodeFlags(config.runtime?.nodeFlags ?? []);
  if (notApplied !== undefined) logger.warn(notApplied, 'runtime.node_flags: running without them');
  const configFile = values.config;
  const agent = new NodeAgent(config, { logger, reloadConfig: () => loadAgentConfig(configFile) });
  // One handler for both signals, kept for the process's life (as the edge's): the first of either
  // kind stops the agent gracefully, any later one (same kind or the other) means "now". A per-kind
  // once-listener would leave the other kind's spent listener in place, swallowing it.
  let stopping = false;
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    const onStopSignal = (received: NodeJS.Signals): void => {
      if (stopping) {
        logger.warn({ signal: received }, 'second stop signal while stopping: exiting now');
        process.exit(1);
      }
      stopping = true;
      resolve(received);
    };
    process.on('SIGTERM', onStopSignal);
    process.on('SIGINT', onStopSignal);
    logger.info({ version: AGENT_VERSION, edge: config.edge.address, providers: config.providers.map((p) => p.id), pid: process.pid, nodeFlags: runningNodeFlags() }, 'node agent starting');
    agent.start();
  });
  logger.info({ signal }, 'stopping');
  await agent.stop();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`node-agent: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
