// Micro-measure behind docs/a2a.md's choice of A2A server pieces: the CPU
// one A2A task costs on the server side, the model run left out (the answer
// is 12 chunks handed over at once). Three ways, in one process:
//   sdk-default: the SDK's JsonRpcTransportHandler over its DefaultRequestHandler
//                (InMemoryTaskStore, event bus manager, result manager) and an
//                AgentExecutor publishing the same events;
//   edge:        the SDK's JsonRpcTransportHandler over EdgeA2AHandler (what the
//                edge runs), its run faked by a plane that feeds the RunSink;
//   framing:     GetTask through JsonRpcTransportHandler vs a direct call, to
//                see what the SDK's JSON-RPC framing alone costs.
// `node dist/bench/a2a-handler.js [--seconds=3]`; prints microseconds per call.
import { randomUUID } from 'node:crypto';

import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler, ServerCallContext, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import type { DataPlane } from '../src/workers/data-plane.js';
import { CALL_STATE, EdgeA2AHandler, type A2ACall } from '../src/workers/a2a/edge-a2a-handler.js';
import { TaskStore } from '../src/workers/a2a/task-store.js';
import { ContextHistory } from '../src/workers/a2a/context-history.js';
import type { RunSink } from '../src/workers/a2a/run-sink.js';

const CHUNKS = 12;
const seconds = Number(process.argv.find((a) => a.startsWith('--seconds='))?.split('=')[1] ?? 3);

function body(method: string, params: unknown, id = 1): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method, params };
}

function sendParams(): Record<string, unknown> {
  return { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello there' }] } };
}

class ChunkExecutor implements AgentExecutor {
  async execute(context: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = context;
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: 1, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [context.userMessage], metadata: undefined }));
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: 2, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
    const artifactId = randomUUID();
    for (let i = 0; i < CHUNKS; i++) {
      bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId, name: 'answer', description: '', parts: [{ content: { $case: 'text', value: `tok${i} ` }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [] }, append: i > 0, lastChunk: false, metadata: undefined }));
    }
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: 3, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
    bus.finished();
  }

  async cancelTask(): Promise<void> {}
}

/** A data plane whose every run answers at once with CHUNKS SSE chunks. */
const fakePlane = {
  shuttingDown: false,
  sharedKeyLimits: false,
  hasModel: () => true,
  begin(_route: unknown, _path: unknown, _request: unknown, response: RunSink): void {
    response.writeHead(200, ['content-type', 'text/event-stream']);
    for (let i = 0; i < CHUNKS; i++) response.write(`data: {"choices":[{"index":0,"delta":{"content":"tok${i} "}}]}\n\n`);
    response.write('data: [DONE]\n\n');
    response.end();
  },
} as unknown as DataPlane;

const agent = { id: 'bench', model: 'm', name: 'bench', description: '', inputModes: ['text/plain'], outputModes: ['text/plain'], skills: [] };

function edgeContext(): ServerCallContext {
  const call: A2ACall = { agent, key: undefined, signal: new AbortController().signal, requestTag: undefined };
  return new ServerCallContext({ state: new Map([[CALL_STATE, call]]) });
}

async function measure(name: string, op: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 500; i++) await op();
  const end = performance.now() + seconds * 1000;
  let n = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() < end) {
    for (let i = 0; i < 100; i++) await op();
    n += 100;
  }
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  console.log(`${name.padEnd(34)} ${((wall * 1000) / n).toFixed(1).padStart(7)} us/call wall, ${((cpu.user + cpu.system) / n).toFixed(1).padStart(7)} us/call cpu (${n} calls)`);
}

async function drain(result: unknown): Promise<void> {
  for await (const _ of result as AsyncIterable<unknown>) void _;
}

async function main(): Promise<void> {
  const card = { name: 'bench', description: '', supportedInterfaces: [], provider: undefined, version: '1', documentationUrl: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false }, securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [], signatures: [], iconUrl: undefined };
  const sdk = new JsonRpcTransportHandler(new DefaultRequestHandler(card, new InMemoryTaskStore(), new ChunkExecutor()));
  const edgeHandler = new EdgeA2AHandler(fakePlane, new TaskStore(-1, 100_000), -1, 60_000, new ContextHistory({ maxTurns: 20, maxBytes: 262_144, maxContexts: 100_000, maxTotalBytes: 256 * 1_048_576, ttlMs: 60_000 }));
  const edge = new JsonRpcTransportHandler(edgeHandler);

  await measure('sdk-default SendMessage', () => sdk.handle(body('SendMessage', sendParams()), new ServerCallContext()));
  await measure('edge SendMessage', () => edge.handle(body('SendMessage', sendParams()), edgeContext()));
  await measure('sdk-default SendStreamingMessage', async () => drain(await sdk.handle(body('SendStreamingMessage', sendParams()), new ServerCallContext())));
  await measure('edge SendStreamingMessage', async () => drain(await edge.handle(body('SendStreamingMessage', sendParams()), edgeContext())));

  const made = (await edge.handle(body('SendMessage', sendParams()), edgeContext())) as { result: { task: { id: string } } };
  const id = made.result.task.id;
  await measure('framing: GetTask via JsonRpcTransport', () => edge.handle(body('GetTask', { id }), edgeContext()));
  await measure('framing: GetTask direct call', () => edgeHandler.getTask({ tenant: '', id, historyLength: undefined }, edgeContext()));
}

void main();
