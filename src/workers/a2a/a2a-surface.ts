// The A2A routes of the client listener: Agent Cards (GET, public so a
// client learns how to authenticate) and each agent's JSON-RPC endpoint
// (POST /a2a/{id}; API keys checked by the listener's onRequest hook like
// /v1/). The SDK's JsonRpcTransportHandler (A2A 1.0) and, for the 0.3
// method names, its LegacyJsonRpcTransportHandler parse and frame the
// calls; EdgeA2AHandler runs them. Streaming answers go out as SSE, one
// JSON-RPC envelope per event. The SDK's server bundle is loaded on the
// first call, so an edge without A2A traffic never pays for it.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { A2AAgentConfig, EdgeConfig } from '../../shared/config-types.js';
import type { A2ARelayMessage } from '../../contract/io-protocol.js';
import type { DataPlane } from '../data-plane.js';
import type { ApiKeyState } from '../http/client-auth.js';
import { limitsOf } from '../../shared/config-hardening.js';
import { dialAddress } from '../../shared/url-host.js';
import { Errors } from '../../shared/errors.js';
import { A2A_ERRORS, bodyMediaRefusal } from '../http/api-routes.js';
import { logRefusal, refusalId } from '../http/refusal-id.js';
import { closeAfterAnswer } from '../http/linger.js';
import { agentCard, AGENT_PREFIX, CARD_PATH, edgeCard } from './agent-card.js';
import { CALL_STATE, checkTaskId, EdgeA2AHandler, type A2ACall, type RelayPost } from './edge-a2a-handler.js';
import { ContextHistory, type HistoryLimits } from './context-history.js';
import { TaskStore } from './task-store.js';
import { firstInvalidUtf8 } from '../body/utf8.js';
import { inspectBody } from '../http/inspect.js';

type ServerSdk = typeof import('@a2a-js/sdk/server');
type LegacySdk = typeof import('@a2a-js/sdk/compat/v0_3/server');

interface Transports {
  readonly sdk: ServerSdk;
  readonly current: InstanceType<ServerSdk['JsonRpcTransportHandler']>;
  readonly legacy: InstanceType<LegacySdk['LegacyJsonRpcTransportHandler']>;
  readonly mapLegacyError: LegacySdk['LegacyJsonRpcTransportHandler']['mapToLegacyJSONRPCError'];
}

const JSON_HEADERS = { 'content-type': 'application/json' };
/** A card whose URLs come from the request's Host: caches key it by Host too. */
const CARD_BY_HOST_HEADERS = { 'content-type': 'application/json', vary: 'Host' };
/**
 * With config `cors` a card's Access-Control-Allow-Origin depends on the request's Origin (workers/http/cors.ts):
 * a cache keys it by Origin too, whatever this request sent, or one page's copy (or a server's, unmarked) is
 * served to another page. These replace the Vary: Origin that CORS set on the response.
 */
const CARD_BY_ORIGIN_HEADERS = { 'content-type': 'application/json', vary: 'Origin' };
const CARD_BY_HOST_AND_ORIGIN_HEADERS = { 'content-type': 'application/json', vary: 'Host, Origin' };
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' };
const REQUEST_TAG = /^[\x21-\x7e]{1,128}$/;
/** A Host header's value as an authority: a name or an IPv4 address, or an IPv6 one in brackets, and an optional port. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]+)(?::\d{1,5})?$/;
/** Each agent's JSON-RPC endpoint. */
const RPC_ROUTE = `${AGENT_PREFIX}:agent`;
/** The same at the agent's base URL (`…/a2a/{id}/`, where its card is found): a GET there is told Allow: POST. */
const RPC_BASE_ROUTE = `${RPC_ROUTE}/`;


function rpcError(id: unknown, code: number, message: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id: id ?? null, error: { code, message } });
}

/**
 * The body as JSON. JSON is UTF-8 (RFC 8259): decoded, ill-formed bytes would
 * become U+FFFD and the prompt reach the model altered, so they are a parse
 * error here, as the /v1/ routes refuse them.
 */
function parseUtf8Json(body: unknown): unknown {
  if (!Buffer.isBuffer(body)) return JSON.parse('');
  const badByte = firstInvalidUtf8(body);
  if (badByte >= 0) throw new SyntaxError(`ill-formed UTF-8 at byte ${badByte}`);
  return JSON.parse(body.toString('utf8'));
}

/**
 * Why `request` is no JSON-RPC 2.0 request this edge answers (-32600), or
 * undefined. A request without an id is a notification, which must get no
 * reply: A2A has none, and running one would start a run whose answer no
 * one can tie to a request, so it is refused before any work.
 */
function malformedRequest(request: Record<string, unknown>): string | undefined {
  if (request.jsonrpc !== '2.0') return 'not a JSON-RPC 2.0 request: "jsonrpc" must be "2.0"';
  if (typeof request.method !== 'string') return 'not a JSON-RPC request: "method" must be a string';
  // The SDK's transport refuses these two as -32602 (invalid params), which names the wrong fault.
  if (request.method === '') return 'not a JSON-RPC request: "method" must name a method';
  if (!('id' in request) || request.id === undefined) return 'a request needs an "id": A2A has no notifications';
  const id = request.id;
  if (id !== null && typeof id !== 'string' && typeof id !== 'number') return 'a JSON-RPC "id" is a string, a number or null';
  if (typeof id === 'number' && !Number.isInteger(id)) return 'a JSON-RPC "id" number must be a whole number';
  return undefined;
}

/**
 * The methods the SDK's transports serve (1.0's, then 0.3's). The SDK checks
 * `params` before it looks the method up, so an unknown method sent without
 * `params` (JSON-RPC lets a call omit them) would be told -32602, invalid
 * params, instead of -32601, method not found.
 */
const METHODS = new Set([
  'SendMessage', 'SendStreamingMessage', 'GetTask', 'ListTasks', 'CancelTask', 'SubscribeToTask', 'CreateTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig', 'ListTaskPushNotificationConfigs', 'GetExtendedAgentCard',
  'message/send', 'message/stream', 'tasks/get', 'tasks/cancel', 'tasks/resubscribe', 'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/get', 'tasks/pushNotificationConfig/list', 'tasks/pushNotificationConfig/delete', 'agent/getAuthenticatedExtendedCard',
]);

export class A2ASurface {
  #config: EdgeConfig;
  readonly #https: boolean;
  readonly #store: TaskStore;
  readonly #history: ContextHistory;
  readonly #workerCount: number;
  readonly handler: EdgeA2AHandler;
  readonly #keyOf: (request: FastifyRequest) => ApiKeyState | undefined;
  #transports: Promise<Transports> | undefined;
  /** Counts the event streams cut because their client stopped reading. */
  readonly #plane: DataPlane;

  constructor(config: EdgeConfig, plane: DataPlane, workerIndex: number, https: boolean, keyOf: (request: FastifyRequest) => ApiKeyState | undefined) {
    this.#config = config;
    this.#plane = plane;
    this.#https = https;
    this.#keyOf = keyOf;
    this.#store = new TaskStore(workerIndex, config.a2a?.maxTasks ?? 10_000, config.a2a?.maxTaskBytes ?? 256 * 1_048_576);
    this.#history = new ContextHistory(historyLimits(config));
    this.handler = new EdgeA2AHandler(plane, this.#store, workerIndex, config.a2a?.taskTtlMs ?? 3_600_000, this.#history);
    this.#workerCount = config.workers.count;
    this.handler.setTopology(this.#workerCount, cliAliases(config));
  }

  setConfig(config: EdgeConfig): void {
    this.#config = config;
    if (config.a2a !== undefined) {
      this.#store.setMaxTasks(config.a2a.maxTasks, config.a2a.maxTaskBytes);
      this.handler.setTtl(config.a2a.taskTtlMs);
      this.#history.setLimits(historyLimits(config));
    }
    // The contexts' homes follow the pool's size when this data path started, not a refreshed config's.
    this.handler.setTopology(this.#workerCount, cliAliases(config));
  }

  /** Task records held here (tests, status). */
  get tasks(): number {
    return this.#store.size;
  }

  setRelay(post: RelayPost): void {
    this.handler.setRelay(post);
  }

  onRelay(message: A2ARelayMessage): void {
    this.handler.onRelay(message);
  }

  /** Worker `peer` exited: see EdgeA2AHandler.peerGone. */
  peerGone(peer: number): void {
    this.handler.peerGone(peer);
  }

  register(app: FastifyInstance): void {
    app.get(CARD_PATH, (request, reply) => {
      const card = edgeCard(this.#config, this.#base(request));
      if (card === undefined) reply.code(404).headers(this.#refusalHeaders(request, 404, Errors.routeNotFound.code)).send(JSON.stringify({ error: 'this edge exposes no A2A agents (config a2a.agents)' }));
      else reply.headers(this.#cardHeaders()).send(JSON.stringify(card));
    });
    app.get(`${AGENT_PREFIX}:agent${CARD_PATH}`, (request, reply) => {
      const agent = this.#agent(request);
      if (agent === undefined) reply.code(404).headers(this.#refusalHeaders(request, 404, Errors.routeNotFound.code)).send(JSON.stringify({ error: `no A2A agent ${JSON.stringify((request.params as { agent?: string }).agent)}` }));
      else reply.headers(this.#cardHeaders()).send(JSON.stringify(agentCard(this.#config, agent, this.#base(request))));
    });
    app.post(RPC_ROUTE, (request, reply) => this.#rpc(request, reply));
    app.post(RPC_BASE_ROUTE, (request, reply) => this.#rpc(request, reply));
  }

  #agent(request: FastifyRequest): A2AAgentConfig | undefined {
    const id = (request.params as { agent?: string }).agent;
    return this.#config.a2a?.agents.find((a) => a.id === id);
  }

  /**
   * A card built from the request's Host (no a2a.public_url) names that host
   * in its URLs, where clients then send their keys: a cache in front must
   * not serve it for another Host.
   */
  #cardHeaders(): Record<string, string> {
    const cors = this.#config.cors !== undefined;
    if (this.#config.a2a?.publicUrl === undefined) return cors ? CARD_BY_HOST_AND_ORIGIN_HEADERS : CARD_BY_HOST_HEADERS;
    return cors ? CARD_BY_ORIGIN_HEADERS : JSON_HEADERS;
  }

  /**
   * Where clients reach this listener: a2a.public_url, else the scheme and Host of the request. A request
   * without a usable Host (HTTP/1.0 may omit it; a value with a path or a query is no host) gets the address
   * its connection reached: the configured one may be a wildcard, or port 0, which no client can dial.
   */
  #base(request: FastifyRequest): string {
    const configured = this.#config.a2a?.publicUrl;
    if (configured !== undefined) return configured;
    const host = request.headers.host;
    return `${this.#https ? 'https' : 'http'}://${host !== undefined && HOST.test(host) ? host : localAuthority(request)}`;
  }

  #loadTransports(): Promise<Transports> {
    this.#transports ??= (async () => {
      const [sdk, legacySdk] = await Promise.all([import('@a2a-js/sdk/server'), import('@a2a-js/sdk/compat/v0_3/server')]);
      return {
        sdk,
        current: new sdk.JsonRpcTransportHandler(this.handler),
        legacy: new legacySdk.LegacyJsonRpcTransportHandler(this.handler),
        mapLegacyError: legacySdk.LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError,
      };
    })();
    const loading = this.#transports;
    // A load that failed (EMFILE in a burst, say) is tried again by the next call, not cached for the process's life.
    loading.catch(() => {
      if (this.#transports === loading) this.#transports = undefined;
    });
    return loading;
  }

  /**
   * Expect: 100-continue on an agent's endpoint, answered from the head (true) when its body would be
   * refused whatever it holds: no such agent here, or headers that say it is no JSON (415, as the /v1/
   * routes answer it uninvited); the connection closes after the answer.
   */
  refusesUpload(request: FastifyRequest, reply: FastifyReply): boolean {
    if (request.routeOptions.url !== RPC_ROUTE && request.routeOptions.url !== RPC_BASE_ROUTE) return false;
    const known = this.#agent(request) !== undefined;
    const refusal = known ? bodyMediaRefusal(request.headers['content-type'], request.headers['content-encoding'], request.headers['transfer-encoding']) : undefined;
    if (known && refusal === undefined) return false;
    closeAfterAnswer(reply.raw);
    if (refusal === undefined) this.#unknownAgent(request, reply);
    else this.#refuseMedia(request, reply, refusal);
    return true;
  }

  /**
   * A refusal before any handler ran: counted in edge_rejects_total under its code (no such agent is an
   * unknown URL, as on /v1/), logged at debug, and given a fresh request id, as the listener's own
   * refusals (401, 405, 413) are (refusal-id.ts).
   */
  #refusalHeaders(request: FastifyRequest, status: number, code: string): Record<string, string> {
    this.#plane.refused(code);
    const id = refusalId();
    logRefusal(this.#plane.logger, id, request.method, request.url, status, code, request.socket.remoteAddress);
    return { ...JSON_HEADERS, 'x-request-id': id, 'request-id': id };
  }

  /** 404: no such agent here. */
  #unknownAgent(request: FastifyRequest, reply: FastifyReply): void {
    reply.code(404).headers(this.#refusalHeaders(request, 404, Errors.routeNotFound.code)).send(rpcError(null, -32601, `no A2A agent ${JSON.stringify((request.params as { agent?: string }).agent)} on this edge`));
  }

  /** 415: a body this endpoint does not read, as the /v1/ routes refuse it (RFC 7694): a compressed body would only read as "not JSON", a labelled-compressed plain one be guessed at. */
  #refuseMedia(request: FastifyRequest, reply: FastifyReply, refusal: string): void {
    if (request.headers['content-encoding'] !== undefined) reply.header('accept-encoding', 'identity');
    reply.code(415).headers(this.#refusalHeaders(request, 415, Errors.unsupportedMediaType.code)).send(A2A_ERRORS.body(Errors.unsupportedMediaType, refusal));
  }

  #rpc(request: FastifyRequest, reply: FastifyReply): void {
    const agent = this.#agent(request);
    if (agent === undefined) {
      this.#unknownAgent(request, reply);
      return;
    }
    const refusal = bodyMediaRefusal(request.headers['content-type'], request.headers['content-encoding'], request.headers['transfer-encoding']);
    if (refusal !== undefined) {
      this.#refuseMedia(request, reply, refusal);
      return;
    }
    const body = request.body;
    let parsed: unknown;
    try {
      parsed = parseUtf8Json(body);
    } catch (err) {
      reply.headers(JSON_HEADERS).send(rpcError(null, -32700, `the body is not JSON: ${(err as Error).message}`));
      return;
    }
    // limits.max_json_depth holds here as on /v1/: nested thousands deep (metadata, a data part), the SDK's
    // (de)serializers overflow the stack after the task ran, and the caller got an internal error for a run it cannot find.
    const depth = inspectBody(body as Buffer, limitsOf(this.#config).maxJsonDepth);
    if (!depth.ok && depth.kind === 'too_deep') {
      reply.code(400).headers(this.#refusalHeaders(request, 400, Errors.tooDeep.code)).send(A2A_ERRORS.body(Errors.tooDeep, depth.message));
      return;
    }
    // JSON-RPC 2.0: a request is an object. Batches (arrays) are not served; null or a scalar is no request.
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      reply.headers(JSON_HEADERS).send(rpcError(null, -32600, Array.isArray(parsed) ? 'JSON-RPC batches are not served; send one request object per call' : 'the body must be a JSON-RPC request object'));
      return;
    }
    const malformed = malformedRequest(parsed as Record<string, unknown>);
    if (malformed !== undefined) {
      reply.headers(JSON_HEADERS).send(rpcError(null, -32600, malformed));
      return;
    }
    const method = (parsed as { method?: unknown }).method;
    if (typeof method === 'string' && !METHODS.has(method)) {
      reply.headers(JSON_HEADERS).send(rpcError((parsed as { id?: unknown }).id, -32601, `method not found: ${method.length > 128 ? `${method.slice(0, 128)}…` : method}`));
      return;
    }
    // The 0.3 methods are the slashed ones (message/send, tasks/get, ...); 1.0's are PascalCase.
    const legacy = typeof method === 'string' && method.includes('/');
    const tag = request.headers['x-request-id'];
    const controller = new AbortController();
    reply.hijack();
    const res = reply.raw;
    res.on('close', () => controller.abort());
    // Gone already (between the body's end and this handler): 'close' has fired, so abort now.
    if (res.destroyed) controller.abort();
    const call: A2ACall = { agent, key: this.#keyOf(request), signal: controller.signal, requestTag: typeof tag === 'string' && REQUEST_TAG.test(tag) ? tag : undefined, fairnessHeaders: fairnessHeadersOf(request.headers) };
    const version = request.headers['a2a-version'];
    const requestedVersion = typeof version === 'string' && version.trim() !== '' ? version.trim() : undefined;
    const card = requestedVersion === undefined ? undefined : agentCard(this.#config, agent, this.#base(request));
    this.#loadTransports().then(
      (t) => {
        // A version this edge does not speak is refused as the SDK's own server refuses it, before any work.
        if (requestedVersion !== undefined && card !== undefined) {
          try {
            // The card is built as JSON (with v0.3 fields beside 1.0's); validateVersion reads only its supportedInterfaces.
            t.sdk.validateVersion(requestedVersion, card as unknown as Parameters<typeof t.sdk.validateVersion>[1], 'JSONRPC');
          } catch (err) {
            const mapError = legacy ? t.mapLegacyError : t.sdk.JsonRpcTransportHandler.mapToJSONRPCError;
            this.#sendJson(res, JSON.stringify({ jsonrpc: '2.0', id: (parsed as { id?: unknown } | null)?.id ?? null, error: mapError(err) }));
            return;
          }
        }
        return this.#handle(t, legacy, parsed as Record<string, unknown>, call, res, requestedVersion);
      },
      (err: Error) => this.#sendJson(res, rpcError(null, -32603, `the A2A server could not start: ${err.message}`)),
    ).catch((err: unknown) => {
      // A fault of ours past the checks: the caller gets an internal error (or its stream ends), never silence, and the process lives on.
      if (res.headersSent) res.end();
      else this.#sendJson(res, rpcError((parsed as { id?: unknown }).id ?? null, -32603, `internal error: ${(err as Error).message ?? String(err)}`));
    });
  }

  async #handle(t: Transports, legacy: boolean, parsed: Record<string, unknown>, call: A2ACall, res: ServerResponse, requestedVersion: string | undefined): Promise<void> {
    const context = new t.sdk.ServerCallContext({ state: new Map([[CALL_STATE, call]]), requestedVersion });
    const mapError = legacy ? t.mapLegacyError : t.sdk.JsonRpcTransportHandler.mapToJSONRPCError;
    let result: unknown;
    // A blocking SendMessage answers when its task ends, which may be minutes away: a client's fetch gives up
    // without a head after 300 s (undici) and proxies sooner. Past the keepalive interval the 200 JSON head goes
    // out and a newline follows every interval; JSON may start with whitespace, so the answer still parses.
    // (A streaming method answers an event stream at once, with its own keepalives: not here.)
    const keepaliveMs = limitsOf(this.#config).sseKeepaliveMs;
    const waiting = keepaliveMs > 0 && !STREAMING_METHOD.test(String(parsed.method)) ? setInterval(jsonKeepalive, keepaliveMs, res) : undefined;
    try {
      // The 1.0 decoding makes any task id a string (5 -> "5", an object -> "[object Object]"), which then read as
      // an unknown task (-32001); 0.3 keeps its type and the handler refuses it as malformed. Same answer for both.
      if (!legacy && TASK_ID_METHOD.test(String(parsed.method))) {
        const id = (parsed.params as { id?: unknown } | null | undefined)?.id;
        if (id !== undefined && id !== null) checkTaskId(id);
      }
      result = legacy ? await t.legacy.handle(parsed, context) : await t.current.handle(parsed, context);
    } catch (err) {
      clearInterval(waiting);
      this.#sendJson(res, JSON.stringify({ jsonrpc: '2.0', id: parsed.id ?? null, error: mapError(err) }));
      return;
    }
    clearInterval(waiting);
    if (!isAsyncIterator(result)) {
      this.#sendJson(res, JSON.stringify(result));
      return;
    }
    // A stream that fails before its first event (unknown task, bad message) answers as plain JSON-RPC.
    let first: IteratorResult<unknown>;
    try {
      first = await result.next();
    } catch (err) {
      this.#sendJson(res, JSON.stringify({ jsonrpc: '2.0', id: parsed.id ?? null, error: mapError(err) }));
      return;
    }
    if (res.destroyed) {
      void result.return?.(undefined);
      return;
    }
    res.writeHead(200, SSE_HEADERS);
    // A task may be silent for long (queued, a cli command thinking): comments keep proxies from cutting it.
    const keepalive = keepaliveMs > 0 ? setInterval(() => res.writableNeedDrain || res.write(': keepalive\n\n'), keepaliveMs) : undefined;
    try {
      for (let step = first; !step.done; step = await result.next()) {
        if (res.destroyed) break;
        // A client reading slower than the tokens come: the next events wait (and merge) in the task's queue, not in the socket's buffer.
        if (!res.write(`data: ${JSON.stringify(step.value)}\n\n`) && !res.destroyed) await drained(res, limitsOf(this.#config).idleTimeoutMs, this.#plane);
      }
    } catch (err) {
      if (!res.destroyed) res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: parsed.id ?? null, error: mapError(err) })}\n\n`);
    } finally {
      clearInterval(keepalive);
      if (res.destroyed) void result.return?.(undefined);
    }
    res.end();
  }

  #sendJson(res: ServerResponse, text: string): void {
    if (res.destroyed) return;
    // Committed early by jsonKeepalive: the answer follows its whitespace.
    if (!res.headersSent) res.writeHead(200, JSON_HEADERS);
    res.end(text);
  }
}

/**
 * Resolves when the response's buffer drained, or it closed. A client that
 * stopped reading never drains it: after `timeoutMs` (limits.idle_timeout_ms;
 * 0 = wait for ever) the response is destroyed, which ends the wait, the
 * caller's loop and its keepalive timer (the task itself runs on).
 */
function drained(res: ServerResponse, timeoutMs: number, plane: DataPlane): Promise<void> {
  return new Promise((resolve) => {
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            plane.clientStalled();
            res.destroy();
          }, timeoutMs)
        : undefined;
    const done = (): void => {
      clearTimeout(timer);
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** JSON-RPC methods answered as an event stream (A2A 1.0 and 0.3 names). */
const STREAMING_METHOD = /^(SendStreamingMessage|SubscribeToTask|message\/stream|tasks\/resubscribe)$/;
/** The 1.0 methods whose params.id names a task. */
const TASK_ID_METHOD = /^(GetTask|CancelTask|SubscribeToTask)$/;

/** Interval: a blocking call still runs; its 200 JSON head (once) and a newline keep the client and proxies waiting. */
function jsonKeepalive(res: ServerResponse): void {
  if (res.destroyed) return;
  if (!res.headersSent) res.writeHead(200, JSON_HEADERS);
  res.write('\n');
}

/** The address and port the request's connection reached, as a URL's authority (an IPv6 address in brackets). */
function localAuthority(request: FastifyRequest): string {
  return dialAddress(request.socket.localAddress ?? '127.0.0.1', request.socket.localPort ?? 0);
}

function historyLimits(config: EdgeConfig): HistoryLimits {
  const a2a = config.a2a;
  return { maxTurns: a2a?.historyMaxTurns ?? 20, maxBytes: a2a?.historyMaxBytes ?? 262_144, maxContexts: a2a?.maxTasks ?? 10_000, maxTotalBytes: a2a?.maxTaskBytes ?? 256 * 1_048_576, ttlMs: a2a?.taskTtlMs ?? 3_600_000 };
}

/** Aliases whose every provider is a cli one: a cli agent's command keeps its own conversation. */
function cliAliases(config: EdgeConfig): ReadonlySet<string> {
  const types = new Map<string, string>();
  for (const node of config.nodes) for (const provider of node.providers) types.set(provider.id, provider.type);
  const out = new Set<string>();
  for (const model of config.models) {
    if (model.providers.size > 0 && [...model.providers.keys()].every((id) => types.get(id) === 'cli')) out.add(model.alias);
  }
  return out;
}

function isAsyncIterator(value: unknown): value is AsyncIterator<unknown> & { return?: (v: undefined) => Promise<unknown> } {
  return typeof value === 'object' && value !== null && typeof (value as { next?: unknown }).next === 'function' && Symbol.asyncIterator in value;
}

/** The fair-queuing headers a run takes from its client (the data path checks them as for /v1/: lower only, a key's own ids). */
function fairnessHeadersOf(headers: IncomingHttpHeaders): Record<string, string> | undefined {
  const priority = headers['x-edge-priority'];
  const fairnessId = headers['x-edge-fairness-id'];
  if (priority === undefined && fairnessId === undefined) return undefined;
  const picked: Record<string, string> = {};
  if (typeof priority === 'string') picked['x-edge-priority'] = priority;
  if (typeof fairnessId === 'string') picked['x-edge-fairness-id'] = fairnessId;
  return picked;
}
