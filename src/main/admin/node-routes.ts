// POST /admin/nodes/:id/drain and /undrain: a draining node gets no new
// requests and finishes its open ones. 404 for a node the edge has never
// heard of, 409 for one that is not connected (draining belongs to a
// connection: a reconnect starts undrained).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendAdminError } from './admin-errors.js';
import type { AdminOps } from './ops.js';

type NodeRequest = FastifyRequest<{ Params: { id: string } }>;

function setDraining(ops: AdminOps, draining: boolean, request: NodeRequest, reply: FastifyReply): void {
  const outcome = ops.setNodeDraining(request.params.id, draining);
  if (outcome.ok) {
    reply.send(outcome);
    return;
  }
  sendAdminError(reply, outcome.code === 'node_not_found' ? 404 : 409, outcome.code, outcome.message);
}

export function registerNodeRoutes(app: FastifyInstance, ops: AdminOps): void {
  app.post('/admin/nodes/:id/drain', (request: NodeRequest, reply) => setDraining(ops, true, request, reply));
  app.post('/admin/nodes/:id/undrain', (request: NodeRequest, reply) => setDraining(ops, false, request, reply));
}
