// GET /admin/status (the edge's state as JSON), GET /admin/keys (each client
// API key's grants, open requests and use) and GET /metrics (Prometheus text).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { knownParameters } from './admin-errors.js';
import type { AdminOps } from './ops.js';

export function registerStatusRoutes(app: FastifyInstance, ops: AdminOps): void {
  app.get('/admin/status', async (_request, reply) => {
    reply.send(await ops.status());
  });
  app.get('/admin/keys', async (request: FastifyRequest<{ Querystring: Record<string, string | string[] | undefined> }>, reply) => {
    if (!knownParameters(reply, '/admin/keys', request.query, [])) return;
    reply.send(await ops.keys());
  });
  app.get('/metrics', async (_request, reply) => {
    const text = await ops.scrapeMetrics();
    reply.header('content-type', ops.metricsContentType).send(text);
  });
}
