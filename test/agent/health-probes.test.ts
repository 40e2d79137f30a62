// The agent's health probe judges the provider by the probe path's own answer.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/config.js';
import { HealthProbes } from '../../src/agent/health-probes.js';
import { runAgentCommand, type CommandContext } from '../../src/agent/commands.js';
import { waitUntil } from '../helpers/stack.js';

let server: Server;
let baseUrl = '';
const hits: string[] = [];

before(async () => {
  // A provider behind a login proxy: the model list redirects to a sign-in page that answers 200.
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/v1/models') res.writeHead(302, { location: '/login' }).end();
    else res.writeHead(200, { 'content-type': 'text/html' }).end('<title>Sign in</title>');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

test('a probe path that redirects (a login page in front of the provider) fails the probe: the redirect is not followed', async () => {
  const config = parseAgentConfig(
    {
      edge: { address: '127.0.0.1:1' },
      node: { id: 'n1', token: 'a-node-token-of-32-characters-xx' },
      providers: [{ id: 'p1', type: 'openai_compat', base_url: baseUrl }],
      health: { interval_ms: 1000, timeout_ms: 1000, unhealthy_after: 1 },
    },
    'test',
  );
  const probes = new HealthProbes(() => config, () => {});
  probes.round();
  // Done once it judged the answer: a failure noted, or the sign-in page fetched (the redirect followed).
  await waitUntil(() => probes.verdicts()[0]?.detail !== '' || hits.includes('/login'), 'the probe done');
  const [verdict] = probes.verdicts();
  assert.equal(verdict.healthy, false);
  assert.match(verdict.detail, /GET \/v1\/models: HTTP 302 \(a redirect to \/login: the probe path must answer itself\)/);
  assert.deepEqual(hits, ['/v1/models'], 'the sign-in page was never fetched');
});

test("the probe command judges a redirecting probe path as the health probes do: unhealthy, the sign-in page never fetched", async () => {
  hits.length = 0;
  const config = parseAgentConfig(
    {
      edge: { address: '127.0.0.1:1' },
      node: { id: 'n1', token: 'a-node-token-of-32-characters-xx' },
      providers: [{ id: 'p1', type: 'openai_compat', base_url: baseUrl }],
    },
    'test',
  );
  // The probe reads only the config.
  const ctx = { config: () => config } as unknown as CommandContext;
  const answer = await runAgentCommand(ctx, 'probe', {}, 2_000);
  assert.equal(answer.status, 'failed');
  const health = (answer.result as { providers: Record<string, { healthy: boolean; status: number; error?: string }> }).providers.p1;
  assert.equal(health.healthy, false);
  assert.equal(health.status, 302);
  assert.match(health.error ?? '', /a redirect to \/login/);
  assert.deepEqual(hits, ['/v1/models'], 'the sign-in page was never fetched');
});

test('healthy_after: an unhealthy provider needs that many passed probes in a row; one that fails every other probe stays out', async () => {
  // Each probe takes the next answer: fail, fail (out), pass, fail, pass, pass (back).
  const answers = [500, 500, 200, 500, 200, 200];
  const provider = createServer((req, res) => res.writeHead(answers.shift() ?? 200).end());
  provider.listen(0, '127.0.0.1');
  await once(provider, 'listening');
  try {
    const config = parseAgentConfig(
      {
        edge: { address: '127.0.0.1:1' },
        node: { id: 'n1', token: 'a-node-token-of-32-characters-xx' },
        providers: [{ id: 'p1', type: 'openai_compat', base_url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}` }],
        health: { interval_ms: 1000, timeout_ms: 1000, unhealthy_after: 2, healthy_after: 2 },
      },
      'test',
    );
    let changes = 0;
    const probes = new HealthProbes(() => config, () => changes++);
    const seen: boolean[] = [];
    for (let i = 0; i < 6; i++) {
      await probes.round();
      seen.push(probes.verdicts()[0].healthy);
    }
    assert.deepEqual(seen, [true, false, false, false, false, true]);
    assert.equal(changes, 2, 'out once, back once: no flap on the lone pass');
    assert.equal(probes.verdicts()[0].detail, '', 'healthy again: its failure is cleared');
  } finally {
    provider.close();
  }
});

