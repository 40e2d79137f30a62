import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { loadAgentConfig, parseAgentConfig } from '../../src/agent/config.js';
import { ConfigError } from '../../src/shared/config-reader.js';

const FULL = `
edge:
  address: 127.0.0.1:50051
  streams: 4
node:
  id: gpu-1
  token: demo-node-token-change-me-7f3a9c
providers:
  - id: gpu-1-mock
    type: openai_compat
    base_url: http://127.0.0.1:9000/gateway/
    api_key: optional-secret
    connections: 64
    endpoints: [chat, responses]
  - id: gpu-1-ollama
    type: ollama
    base_url: http://localhost:11434
  - id: gpu-1-cli
    type: cli
    command: [/usr/bin/agent-cli, --quiet]
    args: [--model, '{model}', --session, '{session}', '--', '{prompt}']
    resume_args: [--resume, '{session}', '--', '{prompt}']
    input: arg
    cwd_root: /srv/sessions
    env: [PATH, 'MODE=batch']
    timeout_ms: 60000
reconnect:
  initial_ms: 100
  max_ms: 5000
tunnels:
  coalesce_delay_ms: 0
  coalesce_max_bytes: 4096
  batch_delay_ms: 5
health:
  interval_ms: 5000
  timeout_ms: 1500
  unhealthy_after: 3
  healthy_after: 2
log_level: debug
runtime:
  node_flags: ['--v8-pool-size=2']
`;

function problemsOf(raw: unknown): readonly string[] {
  try {
    parseAgentConfig(raw, 'agent.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.match(err.message, /^invalid config agent\.yaml:/);
    return err.problems;
  }
  assert.fail('expected the config to be rejected');
}

test('a full config maps snake_case YAML onto the camelCase AgentConfig', () => {
  const config = parseAgentConfig(parseYaml(FULL), 'agent.yaml');
  assert.deepEqual(config, {
    edge: { address: '127.0.0.1:50051', streams: 4 },
    node: { id: 'gpu-1', token: 'demo-node-token-change-me-7f3a9c' },
    providers: [
      // endpoints by type when not listed: ollama serves every API natively, cli only chat.
      { id: 'gpu-1-mock', type: 'openai_compat', baseUrl: 'http://127.0.0.1:9000/gateway/', apiKey: 'optional-secret', connections: 64, endpoints: ['chat', 'responses'] },
      { id: 'gpu-1-ollama', type: 'ollama', baseUrl: 'http://localhost:11434', apiKey: undefined, connections: 128, endpoints: ['chat', 'completions', 'embeddings', 'messages', 'responses'] },
      {
        id: 'gpu-1-cli',
        type: 'cli',
        baseUrl: undefined,
        apiKey: undefined,
        connections: 128,
        endpoints: ['chat'],
        cli: {
          command: ['/usr/bin/agent-cli', '--quiet'],
          args: ['--model', '{model}', '--session', '{session}', '--', '{prompt}'],
          resumeArgs: ['--resume', '{session}', '--', '{prompt}'],
          input: 'arg',
          prompt: 'last_user',
          cwdRoot: '/srv/sessions',
          env: [{ name: 'PATH', value: undefined }, { name: 'MODE', value: 'batch' }],
          timeoutMs: 60000,
          maxOutputBytes: 16 * 1024 * 1024,
          killGraceMs: 2000,
          sessionWaitMs: 60000,
          sessionTtlMs: 7 * 24 * 3_600_000,
        },
      },
    ],
    reconnect: { initialMs: 100, maxMs: 5000 },
    tunnels: { coalesceDelayMs: 0, coalesceMaxBytes: 4096, batchFrames: true, batchDelayMs: 5 },
    health: { intervalMs: 5000, timeoutMs: 1500, unhealthyAfter: 3, healthyAfter: 2 },
    logLevel: 'debug',
    runtime: { nodeFlags: ['--v8-pool-size=2'] },
  });
});

test('omitted optional settings take their documented defaults', () => {
  const config = parseAgentConfig(
    { edge: { address: 'edge.internal:50051' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'vllm', base_url: 'https://gpu:8000' }] },
    'x',
  );
  assert.deepEqual(config.reconnect, { initialMs: 200, maxMs: 10_000 });
  assert.equal(config.logLevel, 'info');
  assert.equal(config.providers[0].connections, 128);
  assert.equal(config.edge.streams, 1);
  assert.deepEqual(config.health, { intervalMs: 0, timeoutMs: 2_000, unhealthyAfter: 2, healthyAfter: 1 }, 'probes are opt-in');
});

test('every problem is reported at once, each naming its path', () => {
  const problems = problemsOf({
    edge: { address: 'no-port-here', tls: true, streams: 0 },
    node: { id: 5 },
    providers: [
      { id: 'a', type: 'openai_compat', base_url: 'ftp://x' },
      { id: 'a', type: 'tgi', base_url: 'not a url', connections: 0 },
      'oops',
    ],
    reconnect: { initial_ms: 500, max_ms: 100 },
    log_level: 'loud',
    extra: 1,
  });
  const expected = [
    /^config\.extra: unknown key/,
    /^edge\.tls: expected a mapping, found boolean true/,
    /^edge\.address: expected host:port/,
    /^edge\.streams: expected an integer from 1 to 64/,
    /^node\.id: expected a non-empty string, found number 5$/,
    /^node\.token: expected a non-empty string/,
    /^providers\[0\]\.base_url: expected an http\(s\) URL/,
    /^providers\[1\]\.id: duplicate provider id "a" \(also at providers\[0\]\.id\)$/,
    /^providers\[1\]\.type: expected one of ollama \| vllm \| openai_compat \| cli, found the string "tgi"$/,
    /^providers\[1\]\.base_url: expected an http\(s\) URL/,
    /^providers\[1\]\.connections: expected an integer from 1/,
    /^providers\[2\]: expected a mapping/,
    /^reconnect\.max_ms: expected an integer from 500 /,
    /^log_level: expected one of fatal/,
  ];
  for (const pattern of expected) assert.ok(problems.some((p) => pattern.test(p)), `no problem matches ${pattern}:\n${problems.join('\n')}`);
  assert.equal(problems.length, expected.length, problems.join('\n'));
});

test('missing sections and an empty provider list are named', () => {
  const problems = problemsOf({ providers: [] });
  assert.deepEqual(
    problems.map((p) => p.split(':')[0]),
    ['edge', 'edge.address', 'node', 'node.id', 'node.token', 'providers'],
  );
  assert.deepEqual(problemsOf('just a string'), [
    'config: expected a mapping, found the string "just a string"',
    'edge: expected a mapping, found nothing',
    'edge.address: expected a non-empty string, found nothing',
    'node: expected a mapping, found nothing',
    'node.id: expected a non-empty string, found nothing',
    'node.token: expected a non-empty string (value not shown: it is a secret)',
    'providers: expected a list, found nothing',
  ]);
});

test('a bad secret is reported without its value', () => {
  const problems = problemsOf({
    edge: { address: '[::1]:50051' },
    node: { id: 'n', token: 123456789 },
    providers: [{ id: 'p', type: 'vllm', base_url: 'http://h:1', api_key: 'sk-live-abc\r\nx-injected: 1' }],
  });
  assert.deepEqual(problems, [
    'node.token: expected a non-empty string (value not shown: it is a secret)',
    'providers[0].api_key: expected printable characters only (value not shown: it is a secret)',
  ]);
  assert.ok(!problems.join('\n').includes('123456789'));
  assert.ok(!problems.join('\n').includes('sk-live'));
});

test("a base_url refused as no http(s) URL is shown without its user:password@: the problem reaches logs and the admin API", () => {
  const problems = problemsOf({
    edge: { address: 'edge:1' },
    node: { id: 'n', token: 't' },
    providers: [
      { id: 'a', type: 'vllm', base_url: 'http://admin:TopSecretPw@gpu:99999' },
      { id: 'b', type: 'vllm', base_url: 'ftp:admin:TopSecretPw@gpu' },
    ],
  });
  assert.deepEqual(problems, [
    'providers[0].base_url: expected an http(s) URL, found the string "http://…@gpu:99999"',
    'providers[1].base_url: expected an http(s) URL, found the string "ftp:…@gpu"',
    "providers[1].base_url: must not hold credentials (user:password@); give the provider's key as api_key",
  ]);
  assert.ok(!problems.join('\n').includes('TopSecretPw'));
});

test('an http provider needs base_url; only cli may omit it', () => {
  const problems = problemsOf({
    edge: { address: 'edge:1' },
    node: { id: 'n', token: 't' },
    providers: [{ id: 'p', type: 'ollama' }],
  });
  assert.deepEqual(problems, ['providers[0].base_url: expected a non-empty string, found nothing']);
});

test('a cli provider: argv command required, placeholders checked, env entries are names or NAME=value', () => {
  const problems = problemsOf({
    edge: { address: 'edge:1' },
    node: { id: 'n', token: 't' },
    providers: [
      { id: 'a', type: 'cli' },
      { id: 'b', type: 'cli', command: 'sh -c "x"', input: 'arg', args: ['{prompt}', '{cwd}'], env: ['BAD NAME', 'OK', 'API KEY=sk-live-secret', 'TOKEN=a\0b', 'OPENAI_API_KEY sk-live-other', 'ghp_abc123456 x'], shell: true },
    ],
  });
  assert.deepEqual(problems, [
    'providers[0].command: expected a list, found nothing',
    'providers[1].shell: unknown key (known: id, type, endpoints, command, args, resume_args, input, prompt, cwd_root, env, timeout_ms, max_output_bytes, kill_grace_ms, session_wait_ms, session_ttl_ms)',
    'providers[1].command: expected a list, found the string "sh -c \\"x\\""',
    'providers[1].args[1]: unknown placeholder {cwd} (known: {prompt}, {model}, {session})',
    // A malformed entry may hold a secret anywhere (a bare token matches a name's pattern): never shown, only its length.
    'providers[1].env[0]: expected NAME (passed through from the agent) or NAME=value, found a string of 8 characters (not shown: it may hold a secret)',
    'providers[1].env[2]: expected NAME (passed through from the agent) or NAME=value, found a string of 22 characters (not shown: it may hold a secret)',
    'providers[1].env[3]: expected NAME (passed through from the agent) or NAME=value (no NUL), found a string of 9 characters (not shown: it may hold a secret)',
    'providers[1].env[4]: expected NAME (passed through from the agent) or NAME=value, found a string of 28 characters (not shown: it may hold a secret)',
    'providers[1].env[5]: expected NAME (passed through from the agent) or NAME=value, found a string of 15 characters (not shown: it may hold a secret)',
  ]);
});

test('a cli provider: a placeholder in command, which is run as it is, is refused (it would reach the program literally)', () => {
  const problems = problemsOf({
    edge: { address: 'edge:1' },
    node: { id: 'n', token: 't' },
    providers: [{ id: 'a', type: 'cli', command: ['/usr/bin/agent-cli', '--model', '{model}', '--session={session}'], args: ['{model}'] }],
  });
  assert.deepEqual(problems, [
    'providers[0].command[2]: {model} is replaced in args and resume_args only (command is run as it is): move it to args',
    'providers[0].command[3]: {session} is replaced in args and resume_args only (command is run as it is): move it to args',
  ]);
});

test('a cli provider serves chat only: endpoints naming another API are refused (its answer is a chat completion whatever the client asked)', () => {
  const problems = problemsOf({
    edge: { address: 'edge:1' },
    node: { id: 'n', token: 't' },
    providers: [
      { id: 'a', type: 'cli', command: ['/bin/true'], endpoints: ['chat', 'messages'] },
      { id: 'b', type: 'cli', command: ['/bin/true'], endpoints: ['chat'] },
    ],
  });
  assert.deepEqual(problems, ['providers[0].endpoints[1]: a cli provider answers as chat completions only, so it serves chat alone (found messages)']);
});

test('loadAgentConfig reads YAML from a file, and names the file on errors', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'agent-config-'));
  try {
    const good = join(dir, 'good.yaml');
    await writeFile(good, FULL);
    assert.equal((await loadAgentConfig(good)).providers[0].apiKey, 'optional-secret');

    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'edge: [unclosed\n');
    await assert.rejects(loadAgentConfig(bad), (err: unknown) => err instanceof ConfigError && err.message.includes(bad) && /not valid YAML/.test(err.message));

    const wrong = join(dir, 'wrong.yaml');
    await writeFile(wrong, FULL.replace('connections: 64', 'connections: lots'));
    await assert.rejects(loadAgentConfig(wrong), (err: unknown) => err instanceof ConfigError && err.problems[0].startsWith('providers[0].connections:'));

    await assert.rejects(loadAgentConfig(join(dir, 'missing.yaml')), (err: unknown) => err instanceof ConfigError && /cannot read/.test(err.message));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a YAML syntax error on a secret\'s line is reported without quoting the line (it reaches the edge\'s log and admin API)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'agent-config-'));
  try {
    const cases = [
      FULL.replace('api_key: optional-secret', 'api_key: "optional-secret"x'),
      FULL.replace('token: demo-node-token-change-me-7f3a9c', 'token: demo-node:token: change-me-7f3a9c'),
      // Secrets that begin with a YAML indicator: the parser's own first line quotes them.
      FULL.replace('api_key: optional-secret', 'api_key: *optional-secret'),
      FULL.replace('api_key: optional-secret', 'api_key: |optional-secret'),
      FULL.replace('token: demo-node-token-change-me-7f3a9c', 'token: >demo-node-token-change-me-7f3a9c'),
    ];
    for (const [i, text] of cases.entries()) {
      const file = join(dir, `broken-${i}.yaml`);
      await writeFile(file, text);
      await assert.rejects(loadAgentConfig(file), (err: unknown) => {
        assert.ok(err instanceof ConfigError && /not valid YAML: /.test(err.message), String(err));
        assert.ok(!/optional-secret|change-me-7f3a9c/.test(err.message), err.message);
        return true;
      });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('edge.tls: a CA, and a client certificate and key that go together', () => {
  const base = { node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'openai_compat', base_url: 'http://127.0.0.1:1' }] };
  const full = parseAgentConfig({ ...base, edge: { address: 'edge:443', tls: { ca_file: '/ca.pem', cert_file: '/c.pem', key_file: '/k.pem', server_name: 'edge.internal' } } }, 't');
  assert.deepEqual(full.edge.tls, { caFile: '/ca.pem', certFile: '/c.pem', keyFile: '/k.pem', serverName: 'edge.internal' });
  assert.equal(parseAgentConfig({ ...base, edge: { address: 'edge:443' } }, 't').edge.tls, undefined);
  assert.throws(
    () => parseAgentConfig({ ...base, edge: { address: 'edge:443', tls: { ca_file: '/ca.pem', cert_file: '/c.pem' } } }, 't'),
    /edge\.tls: cert_file and key_file go together/,
  );
});

test('a base_url with credentials, a query or a fragment is refused: tunnels would drop them and probes mangle them', () => {
  const problems = problemsOf({
    edge: { address: 'edge.internal:50051' },
    node: { id: 'n', token: 't' },
    providers: [
      { id: 'a', type: 'openai_compat', base_url: 'http://user:secret@proxy:8000' },
      { id: 'b', type: 'openai_compat', base_url: 'http://host/openai?api-version=1' },
      { id: 'c', type: 'openai_compat', base_url: 'http://host/openai#x' },
      { id: 'd', type: 'openai_compat', base_url: 'http://host:8000/openai' },
    ],
  });
  assert.equal(problems.length, 3, problems.join('\n'));
  assert.match(problems[0], /^providers\[0\]\.base_url: .*credentials.*api_key/);
  assert.doesNotMatch(problems[0], /secret/, 'the password is never echoed');
  assert.match(problems[1], /^providers\[1\]\.base_url: .*query/);
  assert.match(problems[2], /^providers\[2\]\.base_url: .*fragment/);
});

test('a base_url with port 0 is refused: it names no listener, so every request would fail as refused', () => {
  const problems = problemsOf({
    edge: { address: 'edge.internal:50051' },
    node: { id: 'n', token: 't' },
    providers: [
      { id: 'a', type: 'ollama', base_url: 'http://127.0.0.1:0' },
      { id: 'b', type: 'ollama', base_url: 'http://[::1]:0/ollama/' },
      { id: 'c', type: 'ollama', base_url: 'http://[::1]:11434/ollama/' },
    ],
  });
  assert.equal(problems.length, 2, problems.join('\n'));
  assert.match(problems[0], /^providers\[0\]\.base_url: port 0/);
  assert.match(problems[1], /^providers\[1\]\.base_url: port 0/);
});

test("health_path: '' turns a provider's probe off (as documented); a path must start with '/'", () => {
  const config = parseAgentConfig(
    {
      edge: { address: 'edge.internal:50051' },
      node: { id: 'n', token: 't' },
      providers: [
        { id: 'off', type: 'openai_compat', base_url: 'http://host:8000', health_path: '' },
        { id: 'own', type: 'ollama', base_url: 'http://host:11434', health_path: '/healthz' },
      ],
    },
    'test',
  );
  assert.deepEqual(config.providers.map((p) => p.healthPath), ['', '/healthz']);
  const problems = problemsOf({ edge: { address: 'e:1' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'vllm', base_url: 'http://h:1', health_path: 'healthz' }] });
  assert.equal(problems.length, 1, problems.join('\n'));
  assert.match(problems[0], /^providers\[0\]\.health_path: expected a path starting with '\/', or '' for no probe/);
});

test('a base_url ending in /v1 is refused: every request would go to /v1/v1/…', () => {
  for (const base of ['https://api.example.com/v1', 'http://gpu:8000/v1/', 'http://gpu:8000/llm/v1']) {
    const problems = problemsOf({ edge: { address: 'edge.internal:50051' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'openai_compat', base_url: base }] });
    assert.equal(problems.length, 1, problems.join('\n'));
    assert.match(problems[0], /^providers\[0\]\.base_url: ends in \/v1, but the agent appends each request's own path/);
    assert.match(problems[0], /give the base without \/v1 \(e\.g\. https?:\/\/[a-z.:0-9]+\)/);
  }
  // A prefix that is not /v1 (a proxy's mount point) stays.
  const config = parseAgentConfig({ edge: { address: 'edge.internal:50051' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'openai_compat', base_url: 'http://gpu:8000/v1beta/gateway' }] }, 'x');
  assert.equal(config.providers[0].baseUrl, 'http://gpu:8000/v1beta/gateway');
});

test("an ollama base_url ending in /api (as Ollama's docs write its API) is refused: the probe would GET /api/api/tags", () => {
  for (const base of ['http://gpu:11434/api', 'http://gpu:11434/api/']) {
    const problems = problemsOf({ edge: { address: 'edge.internal:50051' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'ollama', base_url: base }] });
    assert.deepEqual(problems, [`providers[0].base_url: ends in /api, but the agent appends each request's own path (/v1/chat/completions, and /api/tags for its probe), so they would go to /api/v1/…; give Ollama's base without /api (e.g. http://gpu:11434)`]);
  }
  // Another type may well live under /api (a proxy's mount point).
  const config = parseAgentConfig({ edge: { address: 'edge.internal:50051' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'vllm', base_url: 'http://gpu:8000/api' }] }, 'x');
  assert.equal(config.providers[0].baseUrl, 'http://gpu:8000/api');
});

test('a provider id or a provider count the edge refuses at Register is refused here: the agent would reconnect for ever', () => {
  const raw = (ids: readonly string[]): unknown => ({ edge: { address: 'edge:1' }, node: { id: 'n', token: 't' }, providers: ids.map((id) => ({ id, type: 'ollama', base_url: 'http://h:1' })) });
  assert.equal(parseAgentConfig(raw(['p'.repeat(256)]), 'test').providers[0].id.length, 256);
  assert.deepEqual(problemsOf(raw(['p'.repeat(257)])), ['providers[0].id: 257 characters; at most 256 (the edge refuses a node registering a longer one)']);
  assert.deepEqual(problemsOf(raw(Array.from({ length: 1025 }, (_, i) => `p${i}`))), ['providers: 1025 providers; at most 1024 (the edge refuses a node registering more)']);
});

test("node.id and providers[].id the edge's config could never hold are refused, naming the field and value: the agent would be refused or its provider never used", () => {
  const raw = (nodeId: string, providerId: string): unknown => ({ edge: { address: 'edge:1' }, node: { id: nodeId, token: 't' }, providers: [{ id: providerId, type: 'ollama', base_url: 'http://h:1' }] });
  // A non-breaking hyphen (U+2011) pasted from a web page looks like gpu-1.
  assert.deepEqual(problemsOf(raw('gpu\u20111', 'p\u00e9')), [
    `node.id: expected printable ASCII (it is sent in the x-edge-node and x-edge-provider response headers), found the string "gpu\u20111", with U+2011 at character 4`,
    `providers[0].id: expected printable ASCII (it is sent in the x-edge-node and x-edge-provider response headers), found the string "p\u00e9", with U+00E9 at character 2`,
  ]);
  assert.deepEqual(problemsOf(raw('n[1]', '..')), [
    `node.id: "n[1]" holds '[' or ']', which a config refresh uses to name entries; pick another`,
    'providers[0].id: ".." is a dot segment; admin and bootstrap URLs cannot name it',
  ]);
  assert.deepEqual(problemsOf(raw('n'.repeat(257), 'p')), ["node.id: 257 characters; at most 256 (the edge's config holds none longer)"]);
  assert.equal(parseAgentConfig(raw('gpu 1.rack-3_a', 'p q'), 'test').node.id, 'gpu 1.rack-3_a');
});

test('an empty endpoints list is refused: the provider would be announced and never sent a request', () => {
  const raw = { edge: { address: 'edge:1' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'ollama', base_url: 'http://h:1', endpoints: [] }] };
  assert.deepEqual(problemsOf(raw), ["providers[0].endpoints: an empty list serves no API, so the provider would never get a request; leave endpoints out for its type's defaults"]);
});

test('an api_key given with its Bearer scheme or spaces at an end is refused, not sent as "Bearer Bearer …"', () => {
  const raw = (apiKey: string): unknown => ({ edge: { address: 'edge:1' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'vllm', base_url: 'http://h:1', api_key: apiKey }] });
  assert.deepEqual(problemsOf(raw('Bearer sk-live-abc')), ['providers[0].api_key: starts with "Bearer ", which the agent adds itself; give the key alone (value not shown: it is a secret)']);
  assert.deepEqual(problemsOf(raw('BEARER sk-live-abc')), ['providers[0].api_key: starts with "Bearer ", which the agent adds itself; give the key alone (value not shown: it is a secret)']);
  assert.deepEqual(problemsOf(raw(' sk-live-abc')), ['providers[0].api_key: starts or ends with a space; give the key alone (value not shown: it is a secret)']);
  assert.deepEqual(problemsOf(raw('sk-live-abc ')), ['providers[0].api_key: starts or ends with a space; give the key alone (value not shown: it is a secret)']);
  // A key that merely begins with the letters is a key.
  assert.equal(parseAgentConfig(raw('bearerless-key'), 'x').providers[0].apiKey, 'bearerless-key');
});

test("an edge's config given to the agent is named as one, in one line", () => {
  assert.deepEqual(problemsOf({ listen: { http: { port: 8080 } }, nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1' }] }], models: [{ alias: 'm', providers: { p1: 'm' } }] }), [
    "this is an edge's config (it has nodes and models; a node agent's has edge, node and providers): check it with `npm run edge -- check-config FILE`",
  ]);
});
