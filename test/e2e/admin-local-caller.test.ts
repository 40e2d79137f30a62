// An admin listener without a token (the default: loopback only) must not
// be a browser's to drive: a page of another origin cannot act on it (a
// forged POST to 127.0.0.1), and a name that re-resolves to 127.0.0.1 (DNS
// rebinding) cannot read it. The console (its own origin) and non-browser
// callers (curl, scripts: no Origin) keep working.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { silentLogger } from '../../src/shared/logger.js';
import { testWorkers } from '../helpers/stack.js';

let edge: RunningEdge;
let port = 0;

before(async () => {
  edge = await startEdge(
    parseEdgeConfig(
      {
        listen: { http: { port: 0 }, grpc: { port: 0 } },
        admin: { host: '127.0.0.1', port: 0 },
        workers: { count: testWorkers() },
        nodes: [{ id: 'gpu-1', token: 't', providers: [{ id: 'p', capacity: 1 }] }],
        models: [{ alias: 'm', providers: { p: 'served' } }],
      },
      'test',
    ),
    { logger: silentLogger(), admin: true },
  );
  port = Number(new URL(edge.adminUrl as string).port);
});

after(async () => {
  await edge.close();
});

/** A raw request, so that Host and Origin are whatever a browser would send. */
function call(method: string, path: string, headers: Record<string, string>): Promise<{ status: number; code: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

test('a page of another origin cannot act: its forged POST is refused before the route runs', async () => {
  const local = `127.0.0.1:${port}`;
  const forged = await call('POST', '/admin/providers/p/reset', { host: local, origin: 'https://evil.example' });
  assert.deepEqual(forged, { status: 403, code: 'cross_origin' });
  assert.deepEqual(await call('POST', '/admin/providers/p/reset', { host: local, origin: 'null' }), { status: 403, code: 'cross_origin' });
  // The console's own origin, and a caller with no Origin (curl), reach the route.
  assert.notEqual((await call('POST', '/admin/providers/p/reset', { host: local, origin: `http://${local}` })).code, 'cross_origin');
  assert.notEqual((await call('POST', '/admin/providers/p/reset', { host: local })).code, 'cross_origin');
});

test('a name other than a loopback one (DNS rebinding) is refused, reads included', async () => {
  assert.deepEqual(await call('GET', '/admin/status', { host: `rebound.example:${port}` }), { status: 403, code: 'forbidden_host' });
  assert.deepEqual(await call('GET', '/metrics', { host: 'rebound.example' }), { status: 403, code: 'forbidden_host' });
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'LOCALHOST']) {
    assert.equal((await call('GET', '/admin/status', { host })).status, 200, host);
  }
});

test('the console page says it needs no token, so it logs in without asking for one', async () => {
  const page = await (await fetch(`${edge.adminUrl}/console`)).text();
  assert.match(page, /<meta name="edge-admin-auth" content="none">/);
});
