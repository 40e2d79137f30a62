// A2A messages take the fair-queuing headers an HTTP request takes
// (docs/scheduling.md): `x-edge-priority` lowers the key's band, so a
// message marked sheddable that finds no free slot is refused (`shed`) as
// the same chat completion over /v1/ is, not queued at the key's band.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, inFlight, openExchanges, startStack, waitFor, type Stack } from '../helpers/stack.js';

const KEY = 'sk-a2a-fair';

describe('A2A: fair-queuing headers', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      capacity: 1,
      mock: { tokens: 10, intervalMs: 40 },
      configure: (raw) => {
        raw.auth = { api_keys: [{ name: 'fair', key_sha256: sha256Hex(KEY) }] };
        raw.scheduler = { fairness: true };
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('x-edge-priority below zero on a saturated model: a failed task saying shed, as the HTTP refusal', async () => {
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${KEY}` };
    const holder = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hold' }] }) });
    await stack.mock.waitFor(() => stack.mock.stats.inFlight === 1, 3_000);
    // The reference: the same request over /v1/ is shed.
    const http = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { ...headers, 'x-edge-priority': '-1' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'batch' }] }) });
    assert.equal(http.status, 429);
    assert.match(await http.text(), /"shed"/);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm-shed', role: 'ROLE_USER', parts: [{ text: 'batch' }] } } });
    const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers: { ...headers, 'a2a-version': '1.0', 'x-edge-priority': '-1' }, body });
    const answer = (await res.json()) as { result?: { task?: { status?: { state?: string; message?: { parts?: { text?: string }[] } } } } };
    const status = answer.result?.task?.status;
    assert.equal(status?.state, 'TASK_STATE_FAILED', JSON.stringify(answer).slice(0, 300));
    assert.match(status?.message?.parts?.[0]?.text ?? '', /\(shed\)/);
    await holder.text();
    await waitFor(async () => inFlight(stack.edge) === 0, 'the lease to return');
    assert.equal(await openExchanges(stack.edge), 0);
  });
});
