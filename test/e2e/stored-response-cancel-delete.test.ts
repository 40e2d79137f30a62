// A cancel (POST /v1/responses/{id}/cancel) answers with the Response it
// cancelled, but makes none: the edge must not learn the id again from that
// answer. When a DELETE of the same background response, on another
// connection, was answered while the cancel was still on its way back, a
// remembered id would come back from the dead: every later GET, cancel or
// previous_response_id would go to the provider (its own 404, or 409
// response_provider_unavailable while it is away) for the whole TTL, instead
// of the edge's 404 response_not_found.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { Agent } from 'undici';
import { ALIAS, startScriptedProvider, startStack, waitFor, waitUntil, type ScriptedProvider, type Stack } from '../helpers/stack.js';

const responseObject = (id: string, status: string): string =>
  JSON.stringify({ id, object: 'response', created_at: 1, model: 'served', status, background: true, output: [], error: null });

let provider: ScriptedProvider;
let stack: Stack;
/** A background provider's responses by id, with their status. */
const stored = new Map<string, string>();
const asked: string[] = [];
let cancelHeld: Promise<void> | undefined;

before(async () => {
  let made = 0;
  provider = await startScriptedProvider(async (req, res) => {
    const url = req.url ?? '';
    asked.push(`${req.method} ${url}`);
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && url === '/v1/responses') {
      const id = `resp_bg${++made}`;
      stored.set(id, 'queued');
      res.end(responseObject(id, 'queued'));
      return;
    }
    const [, id = '', action] = /^\/v1\/responses\/([^/?]+)(\/cancel)?/.exec(url) ?? [];
    if (!stored.has(id)) {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', param: null, code: null } }));
      return;
    }
    if (action === '/cancel') {
      // Read before the wait, as a provider reads the response it cancels before it answers.
      await cancelHeld;
      res.end(responseObject(id, 'cancelled'));
      return;
    }
    if (req.method === 'DELETE') {
      stored.delete(id);
      res.end(JSON.stringify({ id, object: 'response.deleted', deleted: true }));
      return;
    }
    res.end(responseObject(id, stored.get(id) ?? 'queued'));
  });
  stack = await startStack({ providerType: 'vllm', providerUrl: provider.url });
});

after(async () => {
  await stack.close();
  await provider.close();
});

test('a cancel answered after a DELETE of the same response does not bring its id back', async () => {
  // Two connections: with I/O workers, the kernel may give them to different workers.
  const dispatchers = [new Agent({ connections: 1 }), new Agent({ connections: 1 })];
  const [client, other] = dispatchers.map((dispatcher) => new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0, fetchOptions: { dispatcher } }));
  try {
    const made = await client.responses.create({ model: ALIAS, input: 'work on it', background: true });
    assert.equal(made.status, 'queued');
    let release!: () => void;
    cancelHeld = new Promise((resolve) => (release = resolve));
    const cancelling = client.responses.cancel(made.id);
    await waitUntil(() => asked.includes(`POST /v1/responses/${made.id}/cancel`), 'the cancel to reach the provider');
    const deleted = await other.responses.delete(made.id);
    assert.equal((deleted as unknown as { deleted: boolean }).deleted, true);
    release();
    cancelHeld = undefined;
    assert.equal((await cancelling).status, 'cancelled');
    // Gone from the edge: refused there with its own 404, never asked of the provider again.
    await waitFor(async () => {
      const refused = await client.responses.retrieve(made.id).then(
        () => assert.fail('a deleted response was retrieved'),
        (err: unknown) => err,
      );
      assert.ok(refused instanceof OpenAI.NotFoundError, String(refused));
      return (refused.error as { code?: string } | undefined)?.code === 'response_not_found';
    }, 'the edge to refuse the deleted id itself (it was sent to the provider)', 2_000);
    const sent = asked.length;
    await assert.rejects(other.responses.cancel(made.id), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal((err.error as { code?: string }).code, 'response_not_found');
      return true;
    });
    assert.deepEqual(asked.slice(sent), [], 'nothing more reached the provider');
  } finally {
    await Promise.all(dispatchers.map((d) => d.close()));
  }
});
