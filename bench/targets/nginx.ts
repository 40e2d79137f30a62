// nginx as a one-hop reverse proxy in front of the mock: the throughput a
// C proxy reaches on this machine. Two variants: one worker (a fair match
// for one event loop) and `worker_processes auto` (one per core, as nginx is
// usually deployed). Upstream keep-alive, no response buffering (SSE flows
// through), and request bodies kept in memory up to 2 MB. Run as a child in
// the foreground from a generated config in a temp dir.
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { postOk } from '../harness/http-probe.js';
import { chatBody } from '../harness/bodies.js';
import { freePort } from '../harness/ports.js';
import type { RunningTarget, SkippedTarget, TargetContext, TargetSpec } from '../harness/types.js';

const run = promisify(execFile);

export const NGINX_MISSING = 'nginx not found: apt-get install -y nginx';

/** `nginx -v` (it prints to stderr), e.g. "nginx/1.22.1"; undefined when nginx is not installed. */
export async function nginxVersion(): Promise<string | undefined> {
  try {
    const { stdout, stderr } = await run('nginx', ['-v']);
    const text = `${stdout}${stderr}`.trim();
    return text.replace(/^nginx version:\s*/, '') || 'nginx';
  } catch {
    return undefined;
  }
}

/** `worker_processes`: a count, or 'auto' (one worker per core). */
export type NginxWorkers = number | 'auto';

export function nginxConfig(dir: string, port: number, upstreamPort: number, workers: NginxWorkers = 1): string {
  // As root, nginx would drop its worker to `nobody`, which cannot enter the private temp dir.
  const user = process.getuid?.() === 0 ? 'user root;\n' : '';
  return `${user}worker_processes ${workers};
worker_rlimit_nofile 65536;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events {
  worker_connections 32768;
  multi_accept on;
}
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 16m;
  client_body_buffer_size 2m;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  upstream mock {
    server 127.0.0.1:${upstreamPort};
    keepalive 256;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port} backlog=4096;
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
      proxy_send_timeout 600s;
    }
  }
}
`;
}

function nginxTarget(id: string, label: string, workers: NginxWorkers): TargetSpec {
  return {
    id,
    label,
    kind: 'peer',
    hops: 1,
    async start(ctx: TargetContext): Promise<RunningTarget | SkippedTarget> {
      const info = { id: this.id, label: this.label, kind: this.kind, hops: this.hops };
      const version = await nginxVersion();
      if (version === undefined) return { ...info, skipped: NGINX_MISSING };
      const dir = join(ctx.workDir, id);
      mkdirSync(dir, { recursive: true });
      const port = await freePort();
      const config = nginxConfig(dir, port, ctx.mock.port, workers);
      const configFile = join(dir, 'nginx.conf');
      writeFileSync(configFile, config);
      const child = ctx.supervisor.spawn(id, 'nginx', ['-p', dir, '-c', configFile, '-g', 'daemon off;']);
      const origin = `http://127.0.0.1:${port}`;
      const model = 'bench-model';
      await ctx.supervisor.waitReady(child, () => postOk(`${origin}/v1/chat/completions`, {}, chatBody(model, 256)));
      return {
        ...info,
        origin,
        model,
        headers: {},
        processes: [{ role: 'nginx', pid: child.pid, tree: true }, ctx.mock.process],
        metricsUrl: undefined,
        version,
        configs: { 'nginx.conf': config },
        notes: workers === 'auto' ? [`worker_processes auto: ${os.availableParallelism()} workers on this host`] : [],
      };
    },
  };
}

/** One worker: a fair match for one event loop; the ratios in the headline are read against it. */
export const nginx: TargetSpec = nginxTarget('nginx', 'nginx 1-hop', 1);

/** One worker per core, as nginx is usually deployed. */
export const nginxAuto: TargetSpec = nginxTarget('nginx-auto', 'nginx 1-hop, workers auto', 'auto');
