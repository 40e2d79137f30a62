// Entry of one I/O worker thread (workers.count > 0), started by file URL by
// the WorkerPool. It runs the same LocalPlane as the main thread does with
// workers.count 0, and only adapts it: the scheduler is reached through a
// RemoteScheduler over SAB rings, other workers' nodes through the plane's
// PeerLinks, and the pool's control requests and the plane's events travel
// over the parent port.
import { parentPort, workerData } from 'node:worker_threads';
import { StartError } from '../shared/start-error.js';
import { useTenantSecret } from '../shared/tenant-key.js';
import type { A2ARelayMessage, AffinityAsk, AffinityMessage, ControlRequest, IoWorkerData, WorkerEvent } from '../contract/io-protocol.js';
import { RunWireEncoder } from '../contract/run-wire.js';
import { createLogger } from '../shared/logger.js';
import { LocalPlane } from './local-plane.js';
import { RemoteScheduler } from './remote-scheduler.js';

const data = workerData as IoWorkerData;
if (data.tenantSecret !== undefined) useTenantSecret(data.tenantSecret);
const logger = createLogger('edge', data.logLevel, data.logPretty ? { pretty: true } : {}).child({ worker: data.index });
const port = new RemoteScheduler(data.toMain, data.fromMain);
const runWire = new RunWireEncoder();
// A turn's run reports go as numbers plus new strings (contract/run-wire.ts), the numbers' buffer moved, not copied.
const post = (event: WorkerEvent): void => {
  if (event.type !== 'runs') {
    parentPort?.postMessage(event);
    return;
  }
  const batch = runWire.encode(event.events);
  parentPort?.postMessage(batch, [batch.numbers.buffer]);
};
const plane = new LocalPlane(data.config, data.tls, port, logger, post, data);
// A replacement for a worker that exited: the stored responses the others know, before any client connects.
for (const [responseId, stored, expiresAt] of data.responses ?? []) plane.plane.responses.remember(responseId, stored, expiresAt);
// A stored Response learnt here is passed to every other worker through the pool (docs/architecture.md).
plane.plane.onAffinity = (responseId, stored, expiresAt) => parentPort?.postMessage({ type: 'affinity', responseId, stored, expiresAt } satisfies AffinityMessage);
// Asks of the pool's copy, by call, answered by an 'affinity' request with that call (data-plane.ts askForResponse).
const affinityAsks = new Map<number, () => void>();
let nextAffinityAsk = 1;
plane.plane.askPool = (responseId) =>
  new Promise<void>((resolve) => {
    const call = nextAffinityAsk++;
    affinityAsks.set(call, resolve);
    parentPort?.postMessage({ type: 'affinityAsk', call, responseId } satisfies AffinityAsk);
  });
// A2A tasks live in the worker that ran them; questions about them from other workers travel through the pool.
plane.client.a2a.setRelay((message) => parentPort?.postMessage(message satisfies A2ARelayMessage));
let closing: Promise<void> | undefined;

function close(): Promise<void> {
  closing ??= plane.close().then(() => port.close());
  return closing;
}

async function control(request: ControlRequest): Promise<unknown> {
  switch (request.type) {
    case 'inspect':
      return plane.inspectHere();
    case 'setConfig':
      plane.setConfigHere(request.config);
      return undefined;
    case 'setCertificates':
      plane.setCertificatesHere(request.tls);
      return undefined;
    case 'notifyNode':
      return plane.notifyNode(request.nodeId, request.changedPaths, request.configVersion);
    case 'retireNode':
      return plane.retireNode(request.nodeId, request.graceMs, request.reason, request.holdAnchor === true);
    case 'nodeCommand':
      return plane.nodeCommand(request.nodeId, request.kind, request.args, request.deadlineMs);
    case 'cancelRun':
      return plane.plane.cancelRun(request.runId);
    case 'drain':
      return plane.drain(request.graceMs);
    case 'metrics':
      return (await plane.metricParts())[0];
    case 'affinity':
      // A pool's answer (call) is learnt; another worker's use (expiresAt, no call) only reorders what is known here.
      if (request.call === undefined || request.stored !== null) plane.plane.applyAffinity(request.responseId, request.stored, request.expiresAt, request.call === undefined && request.expiresAt !== undefined);
      if (request.call !== undefined) {
        affinityAsks.get(request.call)?.();
        affinityAsks.delete(request.call);
      }
      return undefined;
    case 'sync':
      return undefined;
    case 'close':
      await close();
      return undefined;
    case 'replacePeer':
      plane.replacePeer(request.peer, request.toPeer, request.fromPeer);
      plane.client.a2a.peerGone(request.peer);
      return undefined;
    case 'testHook':
      if (process.env.EDGE_TEST_HOOKS !== '1') throw new Error('test hooks are off (EDGE_TEST_HOOKS=1 turns them on)');
      if (request.hook === 'stall') {
        const until = performance.now() + request.ms;
        setImmediate(() => {
          while (performance.now() < until);
        });
        return undefined;
      }
      // No answer: the call is rejected when the worker has exited, so a caller that awaited it waits
      // for the replacement, never for the dying worker (an answer first would race its exit).
      return new Promise(() => {
        setImmediate(() => {
          throw new Error('test hook: crash');
        });
      });
  }
}

// A fault in one worker ends that worker only: the pool releases what its
// requests held, re-homes its nodes and starts a new one on the same ports.
process.on('uncaughtException', (err) => {
  logger.fatal({ err }, 'uncaught exception; this I/O worker exits and is replaced');
  try {
    // The reports of runs that did end (the pool closes the rest as worker_exited).
    plane.flushRunReports();
  } catch {
    // The plane is in an unknown state; the pool closes what is left open.
  }
  process.exit(70);
});

parentPort?.on('message', (request: ControlRequest | A2ARelayMessage) => {
  if (request.type === 'a2a') {
    plane.client.a2a.onRelay(request);
    return;
  }
  control(request).then(
    (value) => parentPort?.postMessage({ type: 'reply', id: request.id, value }),
    (err: Error) => parentPort?.postMessage({ type: 'reply', id: request.id, error: err.message }),
  );
});
void port.run((err: unknown) => logger.error({ err }, 'scheduler answer failed'));
plane.start(data.config, data.logLevel, { httpPort: data.httpPort, grpcPort: data.grpcPort }).then(
  (ports) => parentPort?.postMessage({ type: 'ready', value: ports }),
  (err: Error) => {
    // A StartError is the operator's to fix: the main thread says it once, as one line.
    if (!(err instanceof StartError)) logger.error({ err }, 'I/O worker could not start');
    parentPort?.postMessage({ type: 'reply', id: 0, error: err.message, startError: err instanceof StartError });
    process.exit(1);
  },
);
