// What the admin listener's router or Node's HTTP parser refuses (a malformed
// URL, a path segment longer than any id, an oversized or broken head) is
// answered in the admin format ({"error":{"code","message"}}), as every other
// admin error, never in fastify's own.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

/** One raw request on its own connection; resolves with the whole answer (the listener closes after a refusal). */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(text));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

function adminErrorOf(answer: string): { status: number; code: string } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
  const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { code: unknown; message: unknown } };
  assert.equal(typeof body.error.code, 'string', `admin error format: ${answer}`);
  assert.equal(typeof body.error.message, 'string', `admin error format: ${answer}`);
  return { status, code: body.error.code as string };
}

describe('admin refusals before a route runs', () => {
  let stack: OpsStack;
  let port: number;
  before(async () => {
    stack = await startOpsStack();
    port = Number(new URL(stack.edge.adminUrl as string).port);
  });
  after(async () => {
    await stack.close();
  });

  test('a malformed URL, a path segment too long for any id and an oversized head are refused in the admin format', async () => {
    const badUrl = adminErrorOf(await rawRequest(port, 'POST /admin/nodes/%ZZ/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    assert.deepEqual(badUrl, { status: 400, code: 'invalid_request' });
    const tooLong = adminErrorOf(await rawRequest(port, `POST /admin/nodes/${'z'.repeat(5000)}/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`));
    assert.deepEqual(tooLong, { status: 414, code: 'uri_too_long' });
    const bigHead = adminErrorOf(await rawRequest(port, `GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1\r\nx-pad: ${'a'.repeat(20_000)}\r\n\r\n`));
    assert.deepEqual(bigHead, { status: 431, code: 'headers_too_large' });
    const garbage = adminErrorOf(await rawRequest(port, 'NOT A REQUEST\r\n\r\n'));
    assert.deepEqual(garbage, { status: 400, code: 'invalid_request' });
    // The listener still serves.
    assert.equal((await stack.admin('/admin/status')).status, 200);
  });

  test('a body over the route\'s limit, of a type the admin API does not read, or not JSON is refused with its own code and says what to send', async () => {
    const post = async (path: string, contentType: string, body: string): Promise<{ status: number; code: string; message: string }> => {
      const res = await fetch(`${stack.edge.adminUrl}${path}`, { method: 'POST', headers: { 'content-type': contentType }, body });
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      return { status: res.status, code: error.code, message: error.message };
    };
    const big = await post('/admin/nodes/gpu-1/commands', 'application/json', JSON.stringify({ kind: 'probe', pad: 'x'.repeat(1024 * 1024) }));
    assert.deepEqual([big.status, big.code], [413, 'request_too_large']);
    assert.match(big.message, /1048576 bytes/);
    // The refresh route takes 4 MiB (an inline config): its limit is the one named.
    const bigConfig = await post('/admin/config/refresh', 'application/json', JSON.stringify({ mode: 'evaluate', config: 'x'.repeat(4 * 1024 * 1024) }));
    assert.deepEqual([bigConfig.status, bigConfig.code], [413, 'request_too_large']);
    assert.match(bigConfig.message, /4194304 bytes/);
    const yaml = await post('/admin/config/refresh', 'application/yaml', 'mode: evaluate\n');
    assert.deepEqual([yaml.status, yaml.code], [415, 'unsupported_media_type']);
    assert.match(yaml.message, /application\/yaml/);
    assert.match(yaml.message, /application\/json/);
    const broken = await post('/admin/nodes/gpu-1/commands', 'application/json', '{"kind":');
    assert.deepEqual([broken.status, broken.code], [400, 'invalid_json']);
    // The listener still serves.
    assert.equal((await stack.admin('/admin/status')).status, 200);
  });
});
