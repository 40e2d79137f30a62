// A request refused from its head while its body comes (413 over
// limits.body_bytes, 401 without a valid key) is answered at once, and the
// close lingers until the client stops sending. Clients stop at the answer
// and close their side with the body unfinished (the SDKs do, through
// undici), which node:http's parser reports as a parse error. That error is
// the tail of a request already answered: it counted a second refusal,
// `invalid_request`, in edge_rejects_total (and logged it), for a 400 no
// client got. Real stack, the openai SDK unmodified, and a raw socket.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { parsePromText, sampleOf } from '../helpers/prom-text.js';
import { ALIAS, startStack, waitFor, type Stack } from '../helpers/stack.js';

const KEY = 'sk-refused-upload-count-01';
const LIMIT = 64 * 1024;

describe('a refused upload counts one refusal, the one its client got', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ bodyBytes: LIMIT, configure: (raw) => void (raw.auth = { api_keys: [{ name: 'uploader', key_sha256: sha256Hex(KEY) }] }) });
  });
  after(async () => {
    await stack.close();
  });

  async function rejects(): Promise<Map<string, number>> {
    const families = parsePromText(await stack.edge.scrapeMetrics());
    const out = new Map<string, number>();
    for (const s of families.get('edge_rejects_total')?.samples ?? []) out.set(s.labels.reason, s.value);
    return out;
  }

  /**
   * Refusals on fresh connections, counted: each I/O worker that took one has handled what was ready on its
   * sockets before it (a client's close included), so a count that was coming is in by now.
   */
  async function settle(): Promise<void> {
    const before = (await rejects()).get('unknown_url') ?? 0;
    for (let i = 0; i < 8; i++) {
      const dispatcher = new Agent({ connections: 1 });
      const res = await undiciFetch(`${stack.baseURL}/files`, { dispatcher, headers: { authorization: `Bearer ${KEY}` } });
      await res.text();
      await dispatcher.close();
    }
    await waitFor(async () => (await rejects()).get('unknown_url') === before + 8, 'the settling refusals counted');
  }

  /** The openai SDK's chat call with a message of `bytes`, on a connection closed after it; the error it raised. */
  async function sdkChat(apiKey: string, bytes: number): Promise<{ status?: number; code?: string }> {
    const dispatcher = new Agent({ connections: 1 });
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey, maxRetries: 0, fetch: ((url: string, init: object) => undiciFetch(url, { ...init, dispatcher })) as unknown as typeof fetch });
    try {
      await client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'x'.repeat(bytes) }] });
      return {};
    } catch (err) {
      return err as { status?: number; code?: string };
    } finally {
      await dispatcher.close();
    }
  }

  for (const [what, apiKey, status, code] of [
    ['over limits.body_bytes', KEY, 413, 'request_too_large'],
    ['with a wrong key', 'sk-wrong-key-000000000000', 401, 'invalid_api_key'],
  ] as const) {
    test(`an SDK's 8 MiB message ${what}: ${status} ${code}, and no invalid_request`, async () => {
      const before = await rejects();
      const err = await sdkChat(apiKey, 8 << 20);
      assert.equal(err.status, status);
      assert.equal(err.code, code);
      await settle();
      const after = await rejects();
      assert.equal((after.get(code) ?? 0) - (before.get(code) ?? 0), 1, code);
      assert.equal((after.get('invalid_request') ?? 0) - (before.get('invalid_request') ?? 0), 0, `no second refusal: ${JSON.stringify([...after])}`);
    });
  }

  test('a raw upload cut short after its 413: one request_too_large, no invalid_request', async () => {
    const before = await rejects();
    const port = Number(new URL(stack.edge.url).port);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      // The head, a first piece of the body, and the end of the client's side: it gave up on the rest.
      socket.end(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-type: application/json\r\ncontent-length: ${LIMIT * 4}\r\n\r\n{"model":"${ALIAS}","messages":[`);
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.equal((answer.match(/^HTTP\/1\.1 /gm) ?? []).length, 1, answer);
    await settle();
    const after = await rejects();
    assert.equal((after.get('request_too_large') ?? 0) - (before.get('request_too_large') ?? 0), 1);
    assert.equal((after.get('invalid_request') ?? 0) - (before.get('invalid_request') ?? 0), 0, `no second refusal: ${JSON.stringify([...after])}`);
  });
});
