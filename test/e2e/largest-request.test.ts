// A request at both configured maxima (limits.body_bytes and
// limits.max_header_bytes at their ceilings) reaches the provider through a
// real agent: its TunnelRequest, the body plus the head in protobuf, must
// fit the message size the agent accepts, or the agent's gRPC stream fails
// and the node drops with every tunnel on it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { MAX_REQUEST_BODY_BYTES, MAX_REQUEST_HEAD_BYTES } from '../../src/shared/wire-limits.js';
import { ALIAS, NODE_ID, startStack, type Stack } from '../helpers/stack.js';

let stack: Stack;

before(async () => {
  stack = await startStack({
    bodyBytes: MAX_REQUEST_BODY_BYTES,
    mock: { maxHeaderBytes: 2 * MAX_REQUEST_HEAD_BYTES, bodyLogLimit: 0 },
    configure(raw) {
      (raw.limits as Record<string, unknown>).max_header_bytes = MAX_REQUEST_HEAD_BYTES;
      // 64 MiB must cross loopback within the heartbeat timeout on a busy CI machine.
      raw.heartbeat = { interval_ms: 1_000, timeout_ms: 60_000 };
    },
  });
});

after(async () => {
  await stack.close();
});

test('a request with the largest body and the largest head the config allows reaches the provider, and the node stays connected', async () => {
  const prefix = `{"model":"${ALIAS}","messages":[{"role":"user","content":"hi"}],"pad":"`;
  const suffix = '"}';
  const body = Buffer.alloc(MAX_REQUEST_BODY_BYTES, 0x61);
  body.write(prefix, 0, 'latin1');
  body.write(suffix, MAX_REQUEST_BODY_BYTES - suffix.length, 'latin1');
  // Many mid-sized headers (protobuf costs a few bytes more per header than HTTP text),
  // filling the head to just under the limit with the request line and undici's own fields.
  const count = 100;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const each = Math.floor((MAX_REQUEST_HEAD_BYTES - 512) / count) - 'x-pad-000: \r\n'.length;
  for (let i = 0; i < count; i++) headers[`x-pad-${String(i).padStart(3, '0')}`] = 'v'.repeat(each);

  const generation = (await stack.edge.status()).nodes.find((n) => n.id === NODE_ID)?.generation;
  const res = await request(`${stack.edge.url}/v1/chat/completions`, { method: 'POST', body, headers, headersTimeout: 120_000, bodyTimeout: 120_000 });
  const text = await res.body.text();
  assert.equal(res.statusCode, 200, text.slice(0, 300));
  const seen = stack.mock.requestLog.at(-1);
  assert.equal(seen?.receivedHeaders['x-pad-099'], 'v'.repeat(each), 'the provider got the whole head');
  const node = (await stack.edge.status()).nodes.find((n) => n.id === NODE_ID);
  assert.equal(node?.connected, true);
  assert.equal(node?.generation, generation, 'the same connection: the node was not dropped');
});
