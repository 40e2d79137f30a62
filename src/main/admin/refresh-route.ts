// POST /admin/config/refresh {"mode":"evaluate"|"apply", "config"?: YAML text or object}
//   200: evaluated (dry run), applied, or unchanged (a no-change apply pushes nothing)
//   400: the candidate is invalid (reasons list every problem) or there is nothing to read
//   409: apply refused: a change needs a restart (reasons name each path), or the config
//        file changed since the evaluate whose source_digest the apply carries
// An apply waits up to node_timeout_ms (default 5000) for each concerned
// node's answer; `nodes` lists them (applied, restart_required, failed,
// unsupported, timeout). The commit stands whatever they answer.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RefreshMode, RefreshResult } from '../refresh/refresher.js';
import { DEFAULT_COMMAND_DEADLINE_MS, MAX_COMMAND_DEADLINE_MS } from '../../shared/node-commands.js';
import { sendAdminError } from './admin-errors.js';
import type { AdminOps } from './ops.js';

const MODES: readonly RefreshMode[] = ['evaluate', 'apply'];
/** Every field the body takes. */
const FIELDS: readonly string[] = ['mode', 'config', 'node_timeout_ms', 'source_digest'];

export function httpStatusOf(result: RefreshResult): number {
  if (result.rejection === 'invalid_config' || result.rejection === 'no_config_source') return 400;
  if (result.status === 'rejected') return 409;
  return 200;
}

/** The largest refresh body: an inline config. */
export const REFRESH_BODY_LIMIT = 4 * 1024 * 1024;

export function registerRefreshRoute(app: FastifyInstance, ops: AdminOps): void {
  // An inline text is parsed in a thread of its own (config-parse.ts); an inline JSON object is validated on the
  // main thread, which the scheduler shares (~0.2 s for 20,000 nodes): the limit keeps both bounded.
  app.post('/admin/config/refresh', { bodyLimit: REFRESH_BODY_LIMIT }, async (request: FastifyRequest, reply: FastifyReply) => {
    const body = (request.body ?? {}) as { mode?: unknown; config?: unknown; node_timeout_ms?: unknown; source_digest?: unknown };
    if (typeof body !== 'object' || Array.isArray(body)) {
      sendAdminError(reply, 400, 'invalid_request', 'send a JSON object: {"mode":"evaluate"|"apply","config"?: ...}');
      return;
    }
    // A misspelt field would be taken as absent, and an absent one changes what an apply does: `sourceDigest` (as the
    // evaluate's answer spells it) skipped the file check and committed an edit made since, and `confg` applied the file.
    const unknown = Object.keys(body).find((name) => !FIELDS.includes(name));
    if (unknown !== undefined) {
      sendAdminError(reply, 400, 'invalid_request', `unknown field ${JSON.stringify(unknown)}; /admin/config/refresh takes ${FIELDS.join(', ')}`);
      return;
    }
    // Only an absent field takes its default: a null is a value, and not one of the allowed.
    const mode = body.mode === undefined ? 'evaluate' : body.mode;
    if (typeof mode !== 'string' || !(MODES as readonly string[]).includes(mode)) {
      sendAdminError(reply, 400, 'invalid_mode', `mode must be "evaluate" or "apply", got ${JSON.stringify(mode)}`);
      return;
    }
    if (body.config !== undefined && body.config !== null && typeof body.config !== 'string' && typeof body.config !== 'object') {
      sendAdminError(reply, 400, 'invalid_request', 'config must be YAML/JSON text or a JSON object');
      return;
    }
    const nodeTimeoutMs = body.node_timeout_ms === undefined ? DEFAULT_COMMAND_DEADLINE_MS : body.node_timeout_ms;
    if (typeof nodeTimeoutMs !== 'number' || !Number.isInteger(nodeTimeoutMs) || nodeTimeoutMs < 1 || nodeTimeoutMs > MAX_COMMAND_DEADLINE_MS) {
      sendAdminError(reply, 400, 'invalid_request', `node_timeout_ms must be an integer from 1 to ${MAX_COMMAND_DEADLINE_MS}`);
      return;
    }
    if (body.source_digest !== undefined && (typeof body.source_digest !== 'string' || !/^[0-9a-f]{64}$/.test(body.source_digest))) {
      sendAdminError(reply, 400, 'invalid_request', 'source_digest must be the sourceDigest of an evaluate (64 hex digits)');
      return;
    }
    const result = await ops.refresh({ mode: mode as RefreshMode, config: body.config, origin: 'admin', nodeTimeoutMs, sourceDigest: body.source_digest as string | undefined });
    reply.code(httpStatusOf(result)).send(result);
  });
}
