// GET /admin/runs (the recent runs, newest first; filters: state, model,
// node, session, key; limit; before: the next page after that run), GET /admin/runs/:id (one run, 404 once it is
// no longer kept) and POST /admin/runs/:id/cancel. The records live in the
// main thread's RunStore; a cancel goes to whichever thread holds the
// run's client connection.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { knownParameters, sendAdminError } from './admin-errors.js';
import type { AdminOps } from './ops.js';
import { FINISHED_CURSOR, nextCursor, runView } from '../runs/run-store.js';

const STATES: ReadonlySet<string> = new Set(['queued', 'running', 'finished']);
const PARAMETERS: readonly string[] = ['state', 'model', 'node', 'session', 'key', 'limit', 'before'];
const MAX_LIMIT = 10_000;
const LIMIT = /^\d{1,5}$/;

type RunsQuery = FastifyRequest<{ Querystring: Record<string, string | string[] | undefined> }>;

function listRuns(ops: AdminOps, request: RunsQuery, reply: FastifyReply): void {
  const query = request.query;
  // A typo or an unsupported parameter (offset, page) would otherwise return page one.
  if (!knownParameters(reply, '/admin/runs', query, PARAMETERS)) return;
  const { state, model, node, session, key, limit, before } = query;
  if (state !== undefined && !STATES.has(state)) {
    sendAdminError(reply, 400, 'invalid_request', `state must be one of queued, running, finished; got ${JSON.stringify(state)}`);
    return;
  }
  const max = limit === undefined ? 100 : LIMIT.test(limit) ? Number(limit) : NaN;
  if (!(max >= 1 && max <= MAX_LIMIT)) {
    sendAdminError(reply, 400, 'invalid_request', `limit must be an integer from 1 to ${MAX_LIMIT}`);
    return;
  }
  // `before` is a run id, or the `next` of the page before (`finished:<id>` when that run was finished there).
  const beforeFinished = before?.startsWith(FINISHED_CURSOR) === true;
  const beforeId = beforeFinished ? before?.slice(FINISHED_CURSOR.length) : before;
  if (beforeId !== undefined && ops.runs.get(beforeId) === undefined) {
    sendAdminError(reply, 404, 'run_not_found', `before names no kept run ${JSON.stringify(beforeId)} (unknown, or dropped past runs.max_finished)`);
    return;
  }
  const runs = ops.runs.list({ state, model, node, session, key, limit: max, before: beforeId, beforeFinished });
  reply.send({ runs: runs.map(runView), next: nextCursor(runs, max), kept: ops.runs.size, maxFinished: ops.runs.maxFinished, evicted: ops.runs.evicted });
}

export function registerRunsRoutes(app: FastifyInstance, ops: AdminOps): void {
  app.get('/admin/runs', (request: RunsQuery, reply) => listRuns(ops, request, reply));
  app.get('/admin/runs/:id', (request: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const record = ops.runs.get(request.params.id);
    if (record === undefined) sendAdminError(reply, 404, 'run_not_found', `no run ${JSON.stringify(request.params.id)} is kept (unknown, or dropped past runs.max_finished)`);
    else reply.send(runView(record));
  });
  app.post('/admin/runs/:id/cancel', async (request: FastifyRequest<{ Params: { id: string } }>, reply) => {
    const id = request.params.id;
    switch (await ops.cancelRun(id)) {
      case 'cancelled':
        reply.send({ id, cancelled: true });
        return;
      case 'not_found':
        sendAdminError(reply, 404, 'run_not_found', `no run ${JSON.stringify(id)} is kept (unknown, or dropped past runs.max_finished)`);
        return;
      case 'finished':
        sendAdminError(reply, 409, 'run_finished', `run ${JSON.stringify(id)} already finished (outcome ${ops.runs.get(id)?.outcome ?? 'unknown'}); there is nothing to cancel`);
    }
  });
}
