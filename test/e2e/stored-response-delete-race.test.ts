// A DELETE of a stored response, and uses of it on other connections at the
// same moment: with I/O workers, a worker that has not read the DELETE's
// "forget" yet still finds the id and tells the others it used it. That use
// must only reorder the copies that still know the id: taken as news, it put
// the deleted response back in the pool's copy and in every other worker, for
// its whole TTL, and each later GET, cancel or previous_response_id went to the
// provider (its own 404, or 409 response_provider_unavailable while it is away)
// instead of the edge's 404 response_not_found.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { ALIAS, startScriptedProvider, startStack, waitFor, type ScriptedProvider, type Stack } from '../helpers/stack.js';

let provider: ScriptedProvider;
let stack: Stack;
const stored = new Set<string>();
/** Called when a DELETE reached the provider, with its answer to send. */
let onDelete: ((answer: () => void) => void) | undefined;

before(async () => {
  let made = 0;
  provider = await startScriptedProvider((req, res) => {
    const url = req.url ?? '';
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && url === '/v1/responses') {
      const id = `resp_race${++made}`;
      stored.add(id);
      res.end(JSON.stringify({ id, object: 'response', created_at: 1, status: 'queued', background: true, output: [] }));
      return;
    }
    const id = /^\/v1\/responses\/([^/?]+)/.exec(url)?.[1] ?? '';
    if (!stored.has(id)) {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', param: null, code: null } }));
      return;
    }
    if (req.method === 'DELETE') {
      stored.delete(id);
      const answer = (): void => void res.end(JSON.stringify({ id, object: 'response.deleted', deleted: true }));
      if (onDelete === undefined) answer();
      else onDelete(answer);
      return;
    }
    res.end(JSON.stringify({ id, object: 'response', created_at: 1, status: 'queued', background: true, output: [] }));
  });
  stack = await startStack({ providerType: 'vllm', providerUrl: provider.url, capacity: 64, maxQueue: 64 });
});

after(async () => {
  await stack.close();
  await provider.close();
});

/** One request on a connection of its own (spread over the I/O workers by the kernel): status and the error code, if any. */
async function call(method: 'GET' | 'POST' | 'DELETE', path: string, body?: string): Promise<{ status: number; code: string | null | undefined; id?: string }> {
  const dispatcher = new Agent({ connections: 1 });
  try {
    const res = await request(`${stack.baseURL}${path}`, { method, dispatcher, headers: { 'content-type': 'application/json' }, body });
    const json = (await res.body.json()) as { id?: string; error?: { code: string | null } };
    return { status: res.statusCode, code: json.error?.code, id: json.id };
  } finally {
    await dispatcher.close();
  }
}

test('GETs racing a DELETE of the same response never bring it back on any worker', async () => {
  for (let round = 0; round < 25; round++) {
    const made = await call('POST', '/responses', JSON.stringify({ model: ALIAS, input: 'work on it', background: true }));
    assert.equal(made.status, 200);
    const id = made.id as string;
    const racing: Promise<unknown>[] = [];
    onDelete = (answer) => {
      // Uses of the id on other connections while the DELETE is answered.
      for (let k = 0; k < 6; k++) racing.push(call('GET', `/responses/${id}`));
      setImmediate(answer);
    };
    const deleted = await call('DELETE', `/responses/${id}`);
    onDelete = undefined;
    assert.equal(deleted.status, 200);
    await Promise.all(racing);
    // Once every worker read the DELETE, each refuses the id itself (code response_not_found), never asking the provider
    // (its 404 has no code): on connections of their own, so every worker is asked.
    await waitFor(
      async () => (await Promise.all(Array.from({ length: 8 }, () => call('GET', `/responses/${id}`)))).every((r) => r.status === 404 && r.code === 'response_not_found'),
      `round ${round}: the deleted ${id} to be unknown on every worker (a GET was sent to the provider)`,
      1_500,
    );
  }
});
