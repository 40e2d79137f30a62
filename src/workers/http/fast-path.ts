// The lean path for the proxied API POSTs (/v1/chat/completions and the
// other API_ROUTES): node:http's request event straight to the data plane,
// without fastify's routing, hook chain, request/reply objects and content
// type parser. Profiles put fastify at ~7 % of the edge's CPU per request
// (docs/perf); everything else (GET /v1/models, stored responses, A2A,
// /healthz, unknown routes and methods) still goes through fastify.
//
// The lifecycle is the fastify path's, step for step, so a client sees the
// same answers either way (the e2e suite runs through this path):
//   1. onRequest checks: Host (HTTP/1.1), API key, then draining or the
//      edge closing (503 shutting_down);
//   2. the body: 413 when Content-Length or the bytes read pass the limit
//      (with Connection: close, as fastify), 400 on a broken body stream;
//   3. ClientServer's handler: content type, inspection, admission.
// Listeners are module functions with the per-request state on one small
// object: no closure per request.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiRoute, ErrorFormat } from './api-routes.js';
import type { GatewayErrorSpec } from '../../shared/errors.js';
import type { Logger } from 'pino';
import { logRefusal, refusalId } from './refusal-id.js';

/** The body a lean request collected, handed to its owner with the route it was read for and the request's `key` (the caller's, untouched). */
export interface BodyOwner<K> {
  bodyRead(route: ApiRoute, request: IncomingMessage, response: ServerResponse, body: Buffer, key: K): void;
  bodyFailed(route: ApiRoute, response: ServerResponse, tooLarge: boolean): void;
}

const kReader = Symbol('edge.bodyReader');

class BodyReader<K> {
  readonly chunks: Buffer[] = [];
  bytes = 0;
  constructor(
    readonly owner: BodyOwner<K>,
    readonly route: ApiRoute,
    readonly response: ServerResponse,
    readonly limit: number,
    readonly key: K,
  ) {}
}

type ReadingRequest = IncomingMessage & { [kReader]?: BodyReader<unknown> };

/**
 * Reads the request body up to `limit` bytes, then calls owner.bodyRead (or
 * bodyFailed: too large, or the stream broke). `key` rides along untouched.
 */
export function readBody<K>(owner: BodyOwner<K>, route: ApiRoute, request: IncomingMessage, response: ServerResponse, limit: number, key: K): void {
  const declared = Number(request.headers['content-length']);
  if (declared > limit) {
    owner.bodyFailed(route, response, true);
    return;
  }
  (request as ReadingRequest)[kReader] = new BodyReader<K>(owner, route, response, limit, key) as BodyReader<unknown>;
  request.on('data', onBodyData);
  request.on('end', onBodyEnd);
  request.on('error', onBodyError);
}

function detach(request: ReadingRequest): BodyReader<unknown> | undefined {
  const reader = request[kReader];
  request[kReader] = undefined;
  request.removeListener('data', onBodyData);
  request.removeListener('end', onBodyEnd);
  request.removeListener('error', onBodyError);
  return reader;
}

function onBodyData(this: ReadingRequest, chunk: Buffer): void {
  const reader = this[kReader];
  if (reader === undefined) return;
  reader.bytes += chunk.length;
  if (reader.bytes > reader.limit) {
    detach(this);
    // The rest of an oversized body is not read: the connection closes after the answer.
    reader.owner.bodyFailed(reader.route, reader.response, true);
    return;
  }
  reader.chunks.push(chunk);
}

function onBodyEnd(this: ReadingRequest): void {
  const reader = detach(this);
  if (reader === undefined) return;
  const { chunks } = reader;
  const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, reader.bytes);
  reader.owner.bodyRead(reader.route, this, reader.response, body, reader.key);
}

function onBodyError(this: ReadingRequest): void {
  const reader = detach(this);
  if (reader !== undefined) reader.owner.bodyFailed(reader.route, reader.response, false);
}

/** An error answer on the raw response to a POST (or `method`) on `path`, in the route's format (fastify's sendError, without fastify); logged at debug. */
export function writeError(logger: Logger, path: string, response: ServerResponse, spec: GatewayErrorSpec, format: ErrorFormat, message?: string, param?: string, method = 'POST'): void {
  if (response.headersSent || response.destroyed) return;
  const status = format.status(spec);
  response.statusCode = status;
  const id = refusalId();
  logRefusal(logger, id, method, path, status, spec.code, response.socket?.remoteAddress);
  response.setHeader('content-type', 'application/json');
  response.setHeader('x-request-id', id);
  response.setHeader('request-id', id);
  response.end(format.body(spec, message, param));
}
