// Without admin.token the admin listener is loopback-only (config.ts), and
// that alone does not keep a browser out: any page the operator visits can
// send a simple POST to 127.0.0.1 (a drain, a run cancel), and a page whose
// name re-resolves to 127.0.0.1 (DNS rebinding) can read and refresh the
// config. So a token-less admin answers only requests that name a loopback
// host, and takes actions only from its own origin (the console) or from a
// caller that is not a browser page (no Origin header).
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { isLoopbackHost } from '../config.js';
import { sendAdminError } from './admin-errors.js';

/** The host name of a Host header: `[::1]:9090` → `[::1]`, `localhost:9090` → `localhost`. */
export function hostNameOf(host: string): string {
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end < 0 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(':');
  return colon < 0 ? host : host.slice(0, colon);
}

/** fastify onRequest hook for an admin listener without a token. */
export function checkLocalCaller(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const host = request.headers.host;
  if (host !== undefined && !isLoopbackHost(hostNameOf(host).toLowerCase())) {
    sendAdminError(reply, 403, 'forbidden_host', `without admin.token the admin API answers to loopback names only, not Host ${JSON.stringify(host)}; set admin.token to reach it by another name`);
    return;
  }
  const origin = request.headers.origin;
  if (origin !== undefined && request.method !== 'GET' && request.method !== 'HEAD' && origin !== `http://${host}` && origin !== `https://${host}`) {
    sendAdminError(reply, 403, 'cross_origin', `a page of another origin (${origin}) may not act on the admin API; without admin.token only its own console and non-browser callers may`);
    return;
  }
  done();
}
