// GET /admin/status (the edge's state as JSON) and GET /metrics (Prometheus text).
import type { FastifyInstance } from 'fastify';
import type { AdminOps } from './ops.js';

export function registerStatusRoutes(app: FastifyInstance, ops: AdminOps): void {
  app.get('/admin/status', async (_request, reply) => {
    reply.send(await ops.status());
  });
  app.get('/metrics', async (_request, reply) => {
    const text = await ops.scrapeMetrics();
    reply.header('content-type', ops.metricsContentType).send(text);
  });
}
