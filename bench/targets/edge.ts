// Our gateway, two hops: client -> edge -> gRPC -> node agent -> mock. Both
// run as their own processes from the built CLIs, with generated configs.
// The edge gets an admin listener for /metrics (event-loop lag) when its
// config accepts one; an edge that refuses the requested workers.count is
// skipped with its own words, so the worker targets light up by themselves
// once worker threads exist.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { chatBody } from '../harness/bodies.js';
import { answers, postOk } from '../harness/http-probe.js';
import { lagP99FromText } from '../harness/metrics.js';
import { DIST, NODE } from '../harness/paths.js';
import { freePort } from '../harness/ports.js';
import type { ChildHandle } from '../harness/processes.js';
import type { RunningTarget, SkippedTarget, TargetContext, TargetInfo, TargetSpec } from '../harness/types.js';

export const EDGE_MODEL = 'bench-model';
const SERVED_MODEL = 'bench-model-served';
const NODE_ID = 'bench-node';
const NODE_TOKEN = 'bench-token';
const PROVIDER_ID = 'bench-mock';

type Json = Record<string, unknown>;

export interface EdgeTargetOptions {
  readonly workers: number;
  /** Defaults to `edge-w<workers>`. */
  readonly id?: string;
  readonly label?: string;
  readonly sweepOnly?: boolean;
  /** Merged over the generated edge config (e.g. a flow-control or coalescing knob). */
  readonly edgeConfig?: Json;
  /** Merged over the generated agent config. */
  readonly agentConfig?: Json;
  readonly onlyScenarios?: readonly string[];
  /** Another checkout's build to run instead of this one's (its dist/ folder), and the commit it was built from. */
  readonly dist?: string;
  readonly baseline?: string;
}

/** Objects merge key by key; anything else in `patch` replaces. */
export function deepMerge(base: Json, patch: Json | undefined): Json {
  if (patch === undefined) return base;
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    const current = out[key];
    const bothObjects = typeof value === 'object' && value !== null && !Array.isArray(value) && typeof current === 'object' && current !== null && !Array.isArray(current);
    out[key] = bothObjects ? deepMerge(current as Json, value as Json) : value;
  }
  return out;
}

export function edgeConfigObject(workers: number, httpPort: number, grpcPort: number, adminPort: number | undefined): Json {
  const config: Json = {
    listen: { http: { host: '127.0.0.1', port: httpPort }, grpc: { host: '127.0.0.1', port: grpcPort } },
    limits: { body_bytes: 16 * 1024 * 1024, tunnel_timeout_ms: 600_000 },
    workers: { count: workers },
    nodes: [
      {
        id: NODE_ID,
        token: NODE_TOKEN,
        // Capacity and queue far above any scenario's concurrency: the bench measures the data path, not admission limits.
        providers: [{ id: PROVIDER_ID, type: 'openai_compat', capacity: 100_000, max_context_tokens: 100_000_000 }],
      },
    ],
    models: [{ alias: EDGE_MODEL, max_queue: 100_000, queue_timeout_ms: 60_000, providers: { [PROVIDER_ID]: SERVED_MODEL } }],
  };
  if (adminPort !== undefined) config.admin = { host: '127.0.0.1', port: adminPort };
  return config;
}

/** `streams`: the agent's edge.streams; one per edge I/O worker lets tunnels stay on the client's worker. */
export function agentConfigObject(grpcPort: number, mockOrigin: string, streams = 1): Json {
  return {
    edge: { address: `127.0.0.1:${grpcPort}`, streams },
    node: { id: NODE_ID, token: NODE_TOKEN },
    // One upstream connection per concurrent stream, up to the largest many-streams variant.
    providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: mockOrigin, connections: 20_000 }],
  };
}

/** The first line of a refusing edge's output that names `key`, for the skip message. */
function lineNaming(child: ChildHandle, key: string): string | undefined {
  return child
    .tail(4_000)
    .split('\n')
    .find((line) => line.includes(key))
    ?.trim()
    .replace(/^-\s*/, '');
}

/** Polls for up to 5 s: with worker threads, /metrics may need a moment before every worker has reported. */
async function metricsHasLag(url: string): Promise<boolean> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      const res = await request(url, { headersTimeout: 2_000, bodyTimeout: 2_000 });
      const text = await res.body.text();
      if (res.statusCode === 200 && lagP99FromText(text) !== undefined) return true;
    } catch {
      // not listening (yet)
    }
    if (Date.now() > deadline) return false;
    await sleep(200);
  }
}

export function edgeTarget(options: EdgeTargetOptions): TargetSpec {
  const id = options.id ?? `edge-w${options.workers}`;
  const info: TargetInfo = {
    id,
    label: options.label ?? `edge 2-hop w=${options.workers}`,
    kind: 'ours',
    hops: 2,
    workers: options.workers,
    sweepOnly: options.sweepOnly ?? false,
    onlyScenarios: options.onlyScenarios,
    baseline: options.baseline,
  };
  const dist = options.dist ?? DIST;
  return {
    ...info,
    async start(ctx: TargetContext): Promise<RunningTarget | SkippedTarget> {
      const [httpPort, grpcPort, adminPort] = [await freePort(), await freePort(), await freePort()];
      const notes: string[] = [];
      let edgeText = '';
      let edge: ChildHandle | undefined;
      let admin: number | undefined = adminPort;
      // At most two tries: with the admin listener, then without it if the config refuses the key.
      for (let attempt = 0; attempt < 2 && edge === undefined; attempt++) {
        const config = deepMerge(edgeConfigObject(options.workers, httpPort, grpcPort, admin), options.edgeConfig);
        edgeText = JSON.stringify(config, null, 2);
        // JSON is YAML: the edge's loader reads it as is.
        const file = join(ctx.workDir, `${id}-edge${attempt === 0 ? '' : '-noadmin'}.yaml`);
        writeFileSync(file, edgeText);
        const child = ctx.supervisor.spawn(`${id}-edge${attempt === 0 ? '' : '-noadmin'}`, NODE, [join(dist, 'src/edge/cli.js'), '--config', file]);
        try {
          await ctx.supervisor.waitReady(child, () => answers(`http://127.0.0.1:${httpPort}/healthz`));
          edge = child;
        } catch (err) {
          if (child.running) throw err;
          const adminLine = admin !== undefined ? lineNaming(child, 'admin') : undefined;
          if (adminLine !== undefined) {
            notes.push(`event-loop lag unavailable: this edge has no admin listener (${adminLine})`);
            admin = undefined;
            continue;
          }
          const workersLine = lineNaming(child, 'workers');
          if (options.workers > 0 && workersLine !== undefined) return { ...info, skipped: `edge refused workers.count=${options.workers}: ${workersLine}` };
          throw err;
        }
      }
      if (edge === undefined) throw new Error(`${id}: edge did not start`);
      let metricsUrl: string | undefined;
      if (admin !== undefined) {
        const url = `http://127.0.0.1:${admin}/metrics`;
        if (await metricsHasLag(url)) metricsUrl = url;
        else notes.push('event-loop lag unavailable: the admin listener has no /metrics with nodejs_eventloop_lag_p99_seconds');
      }

      const agentText = JSON.stringify(deepMerge(agentConfigObject(grpcPort, ctx.mock.origin, Math.max(1, options.workers)), options.agentConfig), null, 2);
      const agentFile = join(ctx.workDir, `${id}-agent.yaml`);
      writeFileSync(agentFile, agentText);
      const agent = ctx.supervisor.spawn(`${id}-agent`, NODE, [join(dist, 'src/agent/cli.js'), '--config', agentFile]);
      const origin = `http://127.0.0.1:${httpPort}`;
      // Ready once a request makes the whole trip (the node has registered).
      await ctx.supervisor.waitReady(agent, () => postOk(`${origin}/v1/chat/completions`, {}, chatBody(EDGE_MODEL, 256)));
      return {
        ...info,
        origin,
        model: EDGE_MODEL,
        headers: {},
        processes: [{ role: 'edge', pid: edge.pid, tree: false }, { role: 'agent', pid: agent.pid, tree: false }, ctx.mock.process],
        metricsUrl,
        version: undefined,
        configs: { 'edge.yaml': edgeText, 'node-agent.yaml': agentText },
        notes,
      };
    },
  };
}
