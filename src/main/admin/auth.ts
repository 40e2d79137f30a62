// Bearer-token check for every admin route (metrics included). The token is
// compared as a fixed-length digest in constant time, so neither its
// content nor its length leaks through timing.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { bearerToken } from '../../shared/bearer.js';
import { sendAdminError } from './admin-errors.js';

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

export class BearerAuth {
  readonly #expected: Buffer;

  constructor(token: string) {
    this.#expected = digest(token);
  }

  accepts(header: string | undefined): boolean {
    const token = bearerToken(header);
    return token !== undefined && timingSafeEqual(this.#expected, digest(token));
  }

  /** fastify onRequest hook. */
  check(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (this.accepts(request.headers.authorization)) {
      done();
      return;
    }
    reply.header('www-authenticate', 'Bearer realm="edge-admin"');
    sendAdminError(reply, 401, 'unauthorized', 'send the admin token as `Authorization: Bearer <admin.token>`');
  }
}
