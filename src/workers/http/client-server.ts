// The client-facing OpenAI-compatible listener (fastify). Bodies arrive as
// raw bytes; they are inspected and rewritten by byte scan, never parsed
// into objects, and handed to the data plane with the hijacked response.
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { EdgeConfig } from '../../shared/config-types.js';
import { errorBody, Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import type { DataPlane } from '../data-plane.js';
import { inspectBody, type InspectError } from './inspect.js';

export const PROXIED_ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'] as const;

function sendError(reply: FastifyReply, spec: GatewayErrorSpec, message?: string): void {
  reply.code(spec.status).header('content-type', 'application/json').send(errorBody(spec, message));
}

function specForInspectError(error: InspectError): GatewayErrorSpec {
  switch (error.kind) {
    case 'missing_model': return Errors.missingModel;
    case 'model_not_string':
    case 'empty_model': return Errors.modelNotString;
    case 'too_deep': return Errors.tooDeep;
    case 'not_object': return Errors.notObject;
    default: return Errors.invalidJson;
  }
}

export class ClientServer {
  readonly app: FastifyInstance;
  private modelsBody = '';

  constructor(
    config: EdgeConfig,
    private readonly plane: DataPlane,
  ) {
    this.app = Fastify({ logger: false, bodyLimit: config.limits.bodyBytes, keepAliveTimeout: 72_000, return503OnClosing: true });
    this.setConfig(config);
    this.app.removeAllContentTypeParsers();
    // Every content type is taken as raw bytes; the inspector decides if it is JSON.
    this.app.addContentTypeParser('*', { parseAs: 'buffer' }, passBuffer);
    this.app.setErrorHandler(onFrameworkError);
    this.app.setNotFoundHandler(onNotFound);
    this.app.get('/v1/models', (_request, reply) => {
      reply.header('content-type', 'application/json').send(this.modelsBody);
    });
    this.app.get('/healthz', (_request, reply) => {
      reply.send({ status: 'ok' });
    });
    for (const route of PROXIED_ROUTES) this.app.post(route, (request, reply) => this.proxy(route, request, reply));
  }

  setConfig(config: EdgeConfig): void {
    const created = Math.floor(Date.now() / 1000);
    this.modelsBody = JSON.stringify({
      object: 'list',
      data: config.models.map((m) => ({ id: m.alias, object: 'model', created, owned_by: 'edge' })),
    });
  }

  async listen(host: string, port: number): Promise<number> {
    await this.app.listen({ host, port });
    const address = this.app.server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  close(): Promise<void> {
    return this.app.close();
  }

  private proxy(route: string, request: FastifyRequest, reply: FastifyReply): void {
    const body = request.body;
    if (!Buffer.isBuffer(body) || body.length === 0) {
      sendError(reply, Errors.invalidJson, 'request body is empty; send a JSON object');
      return;
    }
    const info = inspectBody(body);
    if (!info.ok) {
      sendError(reply, specForInspectError(info), info.kind === 'invalid_json' ? `request body is not valid JSON: ${info.message}` : undefined);
      return;
    }
    if (!this.plane.hasModel(info.model)) {
      sendError(reply, Errors.modelNotFound, `The model ${JSON.stringify(info.model)} does not exist`);
      return;
    }
    reply.hijack();
    this.plane.begin(route, request.raw, reply.raw, body, info);
  }
}

function passBuffer(_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void): void {
  done(null, body);
}

function onNotFound(request: FastifyRequest, reply: FastifyReply): void {
  sendError(reply, Errors.routeNotFound, `unknown route: ${request.method} ${request.url.split('?')[0]}`);
}

function onFrameworkError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    sendError(reply, Errors.bodyTooLarge);
    return;
  }
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    sendError(reply, { ...Errors.invalidJson, status: error.statusCode, code: 'invalid_request' }, error.message);
    return;
  }
  sendError(reply, Errors.internal);
}
