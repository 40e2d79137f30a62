// I/O workers (workers.count 4, more than this machine's cores on purpose):
// the kernel spreads client connections over the workers' shared port, and
// a request whose client worker differs from the node's worker crosses a
// worker <-> worker ring (counted in the inspection). Every client checks
// that the answer it got is its own (the mock stamps each chunk with the
// request's x-request-id and token count), so a tunnel crossed between
// workers or connections fails the test.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { assertLogged, assertOwnBody, assertOwnStream, clientRequestId } from '../helpers/identity.js';
import { ALIAS, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const WORKERS = 4;
const CONNECTIONS = 24;
let stack: Stack;

before(async () => {
  stack = await startStack({ capacity: 8, maxQueue: 64, configure: (raw) => void (raw.workers = { count: WORKERS }) });
});

after(async () => {
  await stack.close();
});

/** One request on its own keep-alive connection (its own agent): a new socket for the kernel to place. */
function chat(agent: http.Agent, stream: boolean, requestId: string, tokens: number): Promise<{ status: number; body: string }> {
  const url = new URL(`${stack.edge.url}/v1/chat/completions`);
  const payload = JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] });
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-request-id': requestId, 'x-mock-tokens': String(tokens) } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

test('client connections are served by more than one worker, and tunnels cross workers intact', async () => {
  assert.equal(stack.edge.workers, WORKERS);
  const agents = Array.from({ length: CONNECTIONS }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  try {
    for (let round = 0; round < 2; round++) {
      const ids = agents.map((_, i) => clientRequestId(`workers-${round}`, i));
      const tokensOf = (i: number): number => 4 + i;
      const results = await Promise.all(agents.map((agent, i) => chat(agent, i % 2 === 0, ids[i], tokensOf(i))));
      for (const [i, r] of results.entries()) {
        assert.equal(r.status, 200, r.body);
        // The whole answer came through, and it is this client's: the stream
        // reached [DONE] with every chunk stamped with this request, the JSON body parses and is stamped so.
        if (i % 2 === 0) {
          assert.ok(r.body.includes('"finish_reason":"stop"'), r.body.slice(-200));
          assertLogged(stack.mock.requestLog, assertOwnStream(r.body, ids[i], tokensOf(i)), ids[i], tokensOf(i));
        } else {
          assert.match(JSON.parse(r.body).choices[0].message.content, /hello from/);
          assertLogged(stack.mock.requestLog, assertOwnBody(r.body, ids[i], tokensOf(i)), ids[i], tokensOf(i));
        }
      }
    }
  } finally {
    for (const agent of agents) agent.destroy();
  }
  // Releases reach the scheduler just after the last response byte.
  await waitUntil(() => stack.edge.driver.status().liveLeases === 0, 'every lease to be released');
  const inspection = await stack.edge.inspect();
  assert.equal(inspection.planes.length, WORKERS);
  const serving = inspection.planes.filter((p) => p.requests > 0);
  assert.ok(serving.length >= 2, `requests per worker: ${inspection.planes.map((p) => p.requests).join(', ')}`);
  assert.equal(inspection.planes.reduce((sum, p) => sum + p.requests, 0), CONNECTIONS * 2);
  // The node's session lives in exactly one worker; requests on the others crossed to it.
  const holders = inspection.planes.filter((p) => p.sessions.length > 0);
  assert.equal(holders.length, 1);
  const crossed = inspection.planes.reduce((sum, p) => sum + p.crossTunnelsOut, 0);
  assert.ok(crossed > 0, 'some tunnels crossed workers');
  assert.equal(holders[0].crossTunnelsIn, crossed, 'every crossing tunnel was opened in the node worker');
  const notHolding = inspection.planes.filter((p) => p.sessions.length === 0).reduce((sum, p) => sum + p.requests, 0);
  assert.equal(crossed, notHolding, 'exactly the requests of the other workers crossed');
  assert.equal(inspection.openExchanges, 0);
  assert.equal(stack.edge.driver.status().liveLeases, 0);
  assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
});

test('status reports the workers and their rings', async () => {
  const status = await stack.edge.status();
  assert.equal(status.workers.count, WORKERS);
  // Two scheduler rings per worker, and one ring from each worker to each other.
  assert.equal(status.workers.rings.length, WORKERS * 2 + WORKERS * (WORKERS - 1));
  for (const ring of status.workers.rings) assert.ok(ring.capacity > 0 && ring.used >= 0 && ring.used <= ring.capacity);
  const node = status.nodes.find((n) => n.connected);
  assert.ok(node !== undefined && node.agentVersion !== null && node.address !== null && node.connectedSince !== null, 'the session details come from its worker');
});
