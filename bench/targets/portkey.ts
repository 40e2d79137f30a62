// The Portkey AI gateway (@portkey-ai/gateway, a TypeScript gateway on hono)
// as a one-hop proxy. It is not a dependency of this project: `npm run
// bench:peers` installs it into bench/peers/. Its package's bin is
// build/start-server.js, which serves on --port=N (8787 by default); each
// request is routed to the mock by headers.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chatBody } from '../harness/bodies.js';
import { postOk } from '../harness/http-probe.js';
import { NODE, PEERS_DIR } from '../harness/paths.js';
import { freePort } from '../harness/ports.js';
import type { RunningTarget, SkippedTarget, TargetContext, TargetSpec } from '../harness/types.js';

export const PORTKEY_MISSING = 'Portkey gateway not installed: run npm run bench:peers';
const PACKAGE_DIR = join(PEERS_DIR, 'node_modules', '@portkey-ai', 'gateway');

interface PackageJson {
  readonly version?: string;
  readonly bin?: string | Readonly<Record<string, string>>;
}

function readPackage(): PackageJson | undefined {
  const file = join(PACKAGE_DIR, 'package.json');
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
}

export function portkeyVersion(): string | undefined {
  return readPackage()?.version;
}

function binOf(pkg: PackageJson): string {
  if (typeof pkg.bin === 'string') return pkg.bin;
  return Object.values(pkg.bin ?? {})[0] ?? 'build/start-server.js';
}

export const portkey: TargetSpec = {
  id: 'portkey',
  label: 'Portkey 1-hop',
  kind: 'peer',
  hops: 1,
  async start(ctx: TargetContext): Promise<RunningTarget | SkippedTarget> {
    const info = { id: this.id, label: this.label, kind: this.kind, hops: this.hops };
    const pkg = readPackage();
    if (pkg === undefined) return { ...info, skipped: PORTKEY_MISSING };
    const port = await freePort();
    // --headless and NODE_ENV=production: no console UI, no log streaming to it.
    const child = ctx.supervisor.spawn('portkey', NODE, [join(PACKAGE_DIR, binOf(pkg)), `--port=${port}`, '--headless'], {
      cwd: PEERS_DIR,
      env: { ...process.env, NODE_ENV: 'production' },
    });
    const origin = `http://127.0.0.1:${port}`;
    const headers = {
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': `${ctx.mock.origin}/v1`,
      // The mock's per-request knobs reach it only if Portkey is told to forward them.
      'x-portkey-forward-headers': 'x-mock-tokens,x-mock-interval-ms,x-mock-ttft-ms',
    };
    const model = 'bench-model';
    await ctx.supervisor.waitReady(child, () => postOk(`${origin}/v1/chat/completions`, headers, chatBody(model, 256)), 20_000);
    return {
      ...info,
      origin,
      model,
      headers,
      processes: [{ role: 'portkey', pid: child.pid, tree: false }, ctx.mock.process],
      metricsUrl: undefined,
      version: pkg.version,
      configs: { 'portkey headers': JSON.stringify(headers) },
      // Seen in its build/start-server.js: the SSE relay loop sleeps 25 ms before passing on a stream's first chunk.
      notes: ['holds each stream\'s first chunk 25 ms (a setTimeout in its SSE relay), which its TTFB includes'],
    };
  },
};
