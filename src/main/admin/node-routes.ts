// POST /admin/nodes/:id/drain and /undrain: a draining node gets no new
// requests and finishes its open ones. 404 for a node the edge has never
// heard of, 409 for one that is not connected (draining belongs to a
// connection: a reconnect starts undrained).
//
// POST /admin/nodes/:ref/commands {"kind", "args"?, "timeout_ms"?}: a node
// command over the stream to every node the reference names (an id, or a
// label). 200 with each node's answer, whatever it is: ok, applied,
// restart_required, failed, unsupported, timeout, not_connected. 404 when
// the reference names no node; 400 for an unknown kind or bad arguments.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_COMMAND_DEADLINE_MS, isNodeCommandKind, MAX_COMMAND_DEADLINE_MS, NODE_COMMAND_ARGS, NODE_COMMAND_KINDS } from '../../shared/node-commands.js';
import { sendAdminError } from './admin-errors.js';
import type { AdminOps } from './ops.js';

type NodeRequest = FastifyRequest<{ Params: { id: string } }>;

/** Every field a command's body takes. */
const COMMAND_FIELDS: readonly string[] = ['kind', 'args', 'timeout_ms'];

function setDraining(ops: AdminOps, draining: boolean, request: NodeRequest, reply: FastifyReply): void {
  const outcome = ops.setNodeDraining(request.params.id, draining);
  if (outcome.ok) {
    reply.send(outcome);
    return;
  }
  sendAdminError(reply, outcome.code === 'node_not_found' ? 404 : 409, outcome.code, outcome.message);
}

async function command(ops: AdminOps, request: NodeRequest, reply: FastifyReply): Promise<void> {
  const body = (request.body ?? {}) as { kind?: unknown; args?: unknown; timeout_ms?: unknown };
  if (typeof body !== 'object' || Array.isArray(body)) {
    sendAdminError(reply, 400, 'invalid_request', 'send a JSON object: {"kind": ..., "args"?: {...}, "timeout_ms"?: N}');
    return;
  }
  // A field or arg the command does not take is refused, not dropped: a `provider` beside `args` (or misspelt inside
  // it) left restart_provider without one, and it ended the runs of every cli provider on the node.
  const unknown = Object.keys(body).find((name) => !COMMAND_FIELDS.includes(name));
  if (unknown !== undefined) {
    sendAdminError(reply, 400, 'invalid_request', `unknown field ${JSON.stringify(unknown)}; a command takes ${COMMAND_FIELDS.join(', ')}`);
    return;
  }
  if (!isNodeCommandKind(body.kind)) {
    sendAdminError(reply, 400, 'invalid_kind', `kind must be one of ${NODE_COMMAND_KINDS.join(', ')}; got ${JSON.stringify(body.kind ?? null)}`);
    return;
  }
  const args: Record<string, string> = {};
  if (body.args !== undefined) {
    if (typeof body.args !== 'object' || body.args === null || Array.isArray(body.args) || !Object.values(body.args).every((v) => typeof v === 'string')) {
      sendAdminError(reply, 400, 'invalid_request', 'args must be an object of string values');
      return;
    }
    const takes = NODE_COMMAND_ARGS[body.kind];
    const unknownArg = Object.keys(body.args).find((name) => !takes.includes(name));
    if (unknownArg !== undefined) {
      sendAdminError(reply, 400, 'invalid_request', `${body.kind} takes ${takes.length === 0 ? 'no args' : `args ${takes.join(', ')}`}; got ${JSON.stringify(unknownArg)}`);
      return;
    }
    Object.assign(args, body.args);
  }
  const timeoutMs = body.timeout_ms ?? DEFAULT_COMMAND_DEADLINE_MS;
  if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_COMMAND_DEADLINE_MS) {
    sendAdminError(reply, 400, 'invalid_request', `timeout_ms must be an integer from 1 to ${MAX_COMMAND_DEADLINE_MS}`);
    return;
  }
  const outcome = await ops.nodeCommand(request.params.id, body.kind, args, timeoutMs);
  if (!outcome.ok) {
    sendAdminError(reply, 404, outcome.code, outcome.message);
    return;
  }
  reply.send({ ref: outcome.ref, kind: outcome.kind, results: outcome.results });
}

export function registerNodeRoutes(app: FastifyInstance, ops: AdminOps): void {
  app.post('/admin/nodes/:id/drain', (request: NodeRequest, reply) => setDraining(ops, true, request, reply));
  app.post('/admin/nodes/:id/undrain', (request: NodeRequest, reply) => setDraining(ops, false, request, reply));
  app.post('/admin/nodes/:id/commands', (request: NodeRequest, reply) => command(ops, request, reply));
}
