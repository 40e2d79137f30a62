// POST /admin/providers/:id/reset: an operator resets a provider's outlier
// breaker (ejected or half-open, or failures counted): it takes requests
// again at once and its counts are forgotten. 404 for a provider the
// scheduler does not know; 200 with `reset: false` when there was nothing to reset.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sendAdminError } from './admin-errors.js';
import type { AdminOps } from './ops.js';

type ProviderRequest = FastifyRequest<{ Params: { id: string } }>;

export function registerProviderRoutes(app: FastifyInstance, ops: AdminOps): void {
  app.post('/admin/providers/:id/reset', (request: ProviderRequest, reply) => {
    const outcome = ops.resetProvider(request.params.id);
    if (outcome === undefined) {
      sendAdminError(reply, 404, 'provider_not_found', `no provider ${JSON.stringify(request.params.id)} is known to the scheduler`);
      return;
    }
    reply.send({ ok: true, provider: request.params.id, reset: outcome });
  });
}
