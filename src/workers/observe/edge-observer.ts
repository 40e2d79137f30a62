// The glue between the data path's hooks and operations: each exchange and
// node lifecycle step becomes a metric update, a run report (always: the
// main thread's run records publish the run events) or a node event on the
// bus, and, where an operator would want it, a log line.
// Lease accounting never depends on anything here.
import type { Logger } from 'pino';
import { queueWaitMs, type ExchangeObserver, type ExchangeView } from './exchange-observer.js';
import type { NodeObserver } from '../grpc/node-gateway.js';
import type { NodeSession } from '../grpc/node-session.js';
import type { EdgeMetrics } from './metrics.js';
import { CLIENT_CLOSED_STATUS } from './metrics.js';
import type { EdgeEvent, RunSink } from '../../contract/events.js';
import { DEFAULT_SESSION } from '../http/session-id.js';

/** Where events go: the EventBus, or (in an I/O worker) a forwarder to the main thread's bus. */
export interface EventSink {
  readonly active: boolean;
  publish(event: EdgeEvent): void;
}

/**
 * Outcomes that are the normal end of a request, not worth an info line. A key's own limits are
 * among them: a client past its rate would otherwise write a line per refusal (metrics count them).
 */
const QUIET_OUTCOMES = new Set(['end', 'client_closed', 'queue_full', 'queue_timeout', 'shed', 'displaced', 'model_not_found', 'node_not_found', 'no_provider_available', 'shutting_down', 'too_many_concurrent_requests', 'rate_limit_exceeded']);

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

export class EdgeObserver implements ExchangeObserver, NodeObserver {
  readonly #bus: EventSink;
  readonly #metrics: EdgeMetrics;
  readonly #logger: Logger;
  readonly #runs: RunSink;

  constructor(
    bus: EventSink,
    metrics: EdgeMetrics,
    logger: Logger,
    /** Run lifecycle reports: always sent (the run records need them), unlike bus events. */
    runs: RunSink,
  ) {
    this.#bus = bus;
    this.#metrics = metrics;
    this.#logger = logger;
    this.#runs = runs;
  }

  // --- ExchangeObserver ----------------------------------------------------------

  exchangeQueued(exchange: ExchangeView): void {
    this.#runs.run({ type: 'run.queued', runId: exchange.runId, requestId: exchange.requestTag, model: exchange.info.model, session: exchange.sessionId === '' ? DEFAULT_SESSION : exchange.sessionId, key: exchange.keyName, at: Date.now() });
  }

  exchangeStarted(exchange: ExchangeView): void {
    const grant = exchange.grant;
    if (grant === undefined) return;
    this.#runs.run({
      type: 'run.dispatched',
      runId: exchange.runId,
      model: exchange.info.model,
      node: grant.nodeId,
      provider: grant.providerId,
      adapter: exchange.adapter,
      attempt: exchange.attempts,
      queueMs: round(queueWaitMs(exchange)),
      at: Date.now(),
    });
  }

  exchangeFirstByte(exchange: ExchangeView): void {
    this.#runs.run({ type: 'run.first_byte', runId: exchange.runId, model: exchange.info.model, ttfbMs: round(exchange.firstByteAt - exchange.startedAt), at: Date.now() });
  }

  exchangeFinished(exchange: ExchangeView, outcome: string): void {
    const now = performance.now();
    this.#metrics.exchangeFinished(exchange, now);
    // An operator's cancel of a queued run counts as run_cancelled (docs/operations.md); a client that left is only its 499.
    if (exchange.grant === undefined && outcome !== 'client_closed') this.#metrics.rejected(outcome);
    const usage = exchange.usage;
    // Ended off a grant (in the queue again, or refused at its first): where it last went, as its metrics say.
    const node = exchange.grant?.nodeId ?? (exchange.triedNodeId === '' ? null : exchange.triedNodeId);
    const provider = exchange.grant?.providerId ?? (exchange.triedProviderId === '' ? null : exchange.triedProviderId);
    const totalMs = round(now - exchange.startedAt);
    // Ended waiting (a queue timeout, a cancel or a client gone while queued): its whole life was the wait, not 0.
    const queueMs = exchange.grant === undefined ? totalMs : round(queueWaitMs(exchange));
    this.#runs.run({
      type: 'run.finished',
      runId: exchange.runId,
      requestId: exchange.requestTag,
      model: exchange.info.model,
      node,
      provider,
      status: exchange.status === 0 ? CLIENT_CLOSED_STATUS : exchange.status,
      outcome,
      totalMs,
      queueMs,
      bytesOut: exchange.bytesOut,
      at: Date.now(),
      tokens: usage === undefined ? null : { prompt: usage.promptTokens, completion: usage.completionTokens },
      ...(exchange.errorMessage === undefined || outcome === 'end' ? {} : { error: exchange.errorMessage }),
    });
    if (!QUIET_OUTCOMES.has(outcome)) {
      this.#logger.info(
        // What the run record says, so the one line an operator finds by request id tells the whole story (how long included).
        { runId: exchange.runId, requestId: exchange.requestTag, model: exchange.info.model, node, provider, status: exchange.status, outcome, totalMs, queueMs },
        'request ended with an error',
      );
    } else if (this.#logger.isLevelEnabled('debug')) {
      this.#logger.debug(
        { runId: exchange.runId, requestId: exchange.requestTag, model: exchange.info.model, provider, status: exchange.status, outcome, totalMs },
        'request finished',
      );
    }
  }

  requestRefused(code: string): void {
    this.#metrics.rejected(code);
  }

  clientStalled(): void {
    this.#metrics.stalledCut();
  }

  exchangeRetried(exchange: ExchangeView, code: string, providerId: string, nodeId: string | null): void {
    this.#metrics.retried(code, providerId);
    this.#runs.run({ type: 'run.requeued', runId: exchange.runId, model: exchange.info.model, reason: code, node: nodeId, provider: providerId === '' ? null : providerId, at: Date.now() });
  }

  // --- NodeObserver ----------------------------------------------------------------

  nodeConnected(session: NodeSession): void {
    this.#bus.publish({ type: 'node.connected', node: session.nodeId, generation: session.generation, address: session.remoteAddress, agentVersion: session.agentVersion, drained: session.registeredDraining });
  }

  nodeDisconnected(session: NodeSession, reason: string): void {
    this.#bus.publish({ type: 'node.disconnected', node: session.nodeId, generation: session.generation, reason });
  }

  nodeProviders(session: NodeSession, added: readonly string[], withdrawn: readonly string[]): void {
    this.#bus.publish({ type: 'node.providers', node: session.nodeId, generation: session.generation, added, withdrawn });
  }

  nodeLeaving(session: NodeSession, reason: string): void {
    this.#bus.publish({ type: 'node.leaving', node: session.nodeId, generation: session.generation, reason });
    this.#bus.publish({ type: 'node.draining', node: session.nodeId, by: 'leaving' });
  }
}
