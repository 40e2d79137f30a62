#!/usr/bin/env node
// node-agent --config FILE: runs the node agent until SIGTERM or SIGINT, then
// leaves the edge gracefully and exits 0. Logs are pino JSON on stdout.
import { parseArgs } from 'node:util';
import { ConfigError } from '../shared/config-reader.js';
import { applyNodeFlags, runningNodeFlags } from '../shared/node-flags.js';
import { exitOnFault } from '../shared/fatal.js';
import { AGENT_VERSION } from './version.js';

const USAGE = `Usage: node-agent --config FILE
       node-agent check-config FILE
       node-agent bootstrap --edge URL --node-id ID [--token-file FILE] [--dir DIR]

Dials the edge, registers this node and runs the provider requests the edge
sends until SIGTERM or SIGINT.

check-config validates FILE and what it names: the edge TLS files, and each
cli provider's program (on the PATH its env gives it); exit 0 = valid,
1 = invalid.

bootstrap fetches this node's agent package and rendered config from the
edge's bootstrap listener, checks their sha256 sums and writes them into
DIR (default: the current directory): agent.tgz, agent.yaml, SHA256SUMS.
The bootstrap token comes from EDGE_BOOTSTRAP_TOKEN or the first line of
--token-file; --token T works too, but every user of the host can read a
command line (ps), so it prints a warning.

Options:
  -c, --config FILE   agent configuration (YAML)
      --pretty        human-readable logs instead of JSON lines (also NODE_ENV=development)
  -h, --help          show this help
  -v, --version       print the version
`;

/** The bootstrap token: --token-file's first line, else --token (with a warning), else EDGE_BOOTSTRAP_TOKEN; a string is a usage error. */
async function bootstrapToken(values: { token?: string; 'token-file'?: string }): Promise<{ token: string } | string> {
  const file = values['token-file'];
  if (file !== undefined && values.token !== undefined) return '--token and --token-file are two answers to one question: give one';
  let token: string | undefined;
  if (file !== undefined) {
    const { readFile } = await import('node:fs/promises');
    try {
      token = (await readFile(file, 'utf8')).split('\n')[0].trim();
    } catch (err) {
      return `--token-file: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
    }
    if (token === '') return `--token-file: ${file} is empty`;
  } else if (values.token !== undefined) {
    token = values.token;
    process.stderr.write('node-agent bootstrap: warning: a token on the command line is visible to every user of this host (ps); prefer EDGE_BOOTSTRAP_TOKEN or --token-file\n');
  } else {
    token = process.env.EDGE_BOOTSTRAP_TOKEN;
  }
  token = token?.trim();
  if (token === undefined || token === '') return 'the bootstrap token is required: EDGE_BOOTSTRAP_TOKEN, --token-file FILE or --token T';
  // Said here, without the value: fetch's own refusal of such a header quotes it, token and all, into the output.
  if (/[\s\x00-\x1f\x7f]|[^\x00-\xff]/.test(token)) return 'the bootstrap token holds whitespace or a character no Authorization header can carry (value not shown: it is a secret)';
  return { token };
}

async function bootstrap(argv: string[]): Promise<number> {
  let values: { edge?: string; 'node-id'?: string; token?: string; 'token-file'?: string; dir?: string };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { edge: { type: 'string' }, 'node-id': { type: 'string' }, token: { type: 'string' }, 'token-file': { type: 'string' }, dir: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`node-agent bootstrap: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { edge } = values;
  const nodeId = values['node-id'];
  if (edge === undefined || nodeId === undefined) {
    process.stderr.write(`node-agent bootstrap: --edge and --node-id are required\n\n${USAGE}`);
    return 2;
  }
  const given = await bootstrapToken(values);
  if (typeof given === 'string') {
    process.stderr.write(`node-agent bootstrap: ${given}\n\n${USAGE}`);
    return 2;
  }
  const { token } = given;
  const { bootstrapNode, BootstrapError } = await import('./bootstrap.js');
  try {
    const outcome = await bootstrapNode({ edge, nodeId, token, dir: values.dir ?? '.' });
    for (const f of outcome.files) process.stdout.write(`${f.sha256}  ${f.name} (${f.bytes} bytes, verified)\n`);
    process.stdout.write(`wrote ${outcome.dir}\nnext: npm install -g --prefix /usr/local --omit=dev ${outcome.dir}/agent.tgz && node-agent --config ${outcome.dir}/agent.yaml\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof BootstrapError)) throw err;
    process.stderr.write(`node-agent bootstrap: ${err.message}\n`);
    return 1;
  }
}

async function checkConfig(argv: string[]): Promise<number> {
  const file = argv[0];
  if (file === undefined || argv.length > 1) {
    process.stderr.write(`node-agent check-config: one FILE\n\n${USAGE}`);
    return 2;
  }
  const [{ loadAgentConfig }, { checkAgentFiles }] = await Promise.all([import('./config.js'), import('./check-config.js')]);
  let config;
  try {
    config = await loadAgentConfig(file);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return 1;
  }
  const problems = await checkAgentFiles(config);
  if (problems.length > 0) {
    process.stderr.write(`${file}: what it names is not usable:\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
    return 1;
  }
  process.stdout.write(`${file}: valid (node ${config.node.id}, ${config.providers.length} providers, edge ${config.edge.address}${config.edge.tls === undefined ? '' : ' over TLS'})\n`);
  return 0;
}

/** `--help` after a subcommand is a request for usage, not a file name or an unknown option. */
function asksHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

async function main(argv: string[]): Promise<number> {
  if ((argv[0] === 'bootstrap' || argv[0] === 'check-config') && asksHelp(argv)) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (argv[0] === 'bootstrap') return bootstrap(argv.slice(1));
  if (argv[0] === 'check-config') return checkConfig(argv.slice(1));
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

  // Loaded only now: grpc-js, protobuf and yaml cost ~0.4 s of startup that --help and --version do not need.
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
  exitOnFault(logger, 'node-agent');
  // Heap and GC-thread sizes only apply to a process started with them: restart in place once (nothing is open yet).
  const notApplied = applyNodeFlags(config.runtime?.nodeFlags ?? []);
  if (notApplied !== undefined) logger.warn(notApplied, 'runtime.node_flags: running without them');
  const configFile = values.config;
  // What would fail later, said now: TLS files unreadable stop the start (every dial would fail), a cli program not found is
  // a warning (the other providers work; its runs fail with cli_failed until it is installed or its cwd_root fixed).
  const { checkAgentFiles } = await import('./check-config.js');
  const problems = await checkAgentFiles(config);
  const tlsProblems = problems.filter((p) => p.startsWith('edge.tls'));
  if (tlsProblems.length > 0) {
    process.stderr.write(`node-agent: ${configFile}: ${tlsProblems.join('; ')}\n`);
    return 1;
  }
  for (const problem of problems) logger.warn({ config: configFile }, problem);
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
