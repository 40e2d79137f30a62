// `npm run mock-provider -- --port 9000 --ttft-ms 50 --tokens 20 --interval-ms 10`
// Runs the mock provider as its own process (benchmarks, the demo by hand)
// and prints one line with its URL.

import { parseArgs } from 'node:util';
import { startMockProvider } from './provider.js';

const USAGE = `usage: mock-provider [--host 127.0.0.1] [--port 9000] [--ttft-ms 0] [--tokens 8] [--interval-ms 0]
                     [--embedding-dim 16] [--models a,b] [--log-limit 1000] [--body-log-limit 100]`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      'ttft-ms': { type: 'string' },
      tokens: { type: 'string' },
      'interval-ms': { type: 'string' },
      'embedding-dim': { type: 'string' },
      models: { type: 'string' },
      'log-limit': { type: 'string' },
      'body-log-limit': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    console.log(USAGE);
    return;
  }
  const provider = await startMockProvider({
    host: values.host,
    port: numberArg('port', values.port) ?? 9000,
    ttftMs: numberArg('ttft-ms', values['ttft-ms']),
    tokens: numberArg('tokens', values.tokens),
    intervalMs: numberArg('interval-ms', values['interval-ms']),
    embeddingDim: numberArg('embedding-dim', values['embedding-dim']),
    models: values.models?.split(',').map((m) => m.trim()).filter((m) => m !== ''),
    logLimit: numberArg('log-limit', values['log-limit']),
    bodyLogLimit: numberArg('body-log-limit', values['body-log-limit']),
  });
  console.log(`mock provider listening on ${provider.url} (OpenAI base URL ${provider.baseURL})`);
  const stop = (): void => {
    void provider.close().finally(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

function numberArg(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new RangeError(`--${name}: expected a number, got '${value}'`);
  return n;
}

main().catch((err: unknown) => {
  console.error(`mock-provider: ${(err as Error).message}\n${USAGE}`);
  process.exit(1);
});
