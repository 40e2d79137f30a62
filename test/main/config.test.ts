import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { loadEdgeConfig, parseEdgeConfig, parseEdgeConfigText } from '../../src/main/config.js';
import { ConfigError } from '../../src/shared/config-reader.js';

function problemsOf(raw: unknown): readonly string[] {
  try {
    parseEdgeConfig(raw, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

test('the example edge config is valid and gets defaults', async () => {
  const config = await loadEdgeConfig(fileURLToPath(new URL('../../../examples/edge.yaml', import.meta.url)));
  assert.equal(config.models[0].alias, 'llama3');
  assert.equal(config.models[0].maxQueue, 16);
  assert.equal(config.models[1].queueTimeoutMs, 30_000);
  assert.equal(config.nodes[0].providers[0].capacity, 4);
});

test('every problem names its path, what was expected and what was found', () => {
  const problems = problemsOf({
    listen: { http: { port: 'eighty', lean_http1: 'no' }, grpc: { lean_http1: false } },
    nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1', capacity: -1, type: 'tgi' }] }],
    models: [{ alias: 'm', providers: { p9: 'served' } }],
    surprise: true,
  });
  const text = problems.join('\n');
  assert.match(text, /listen\.http\.port: expected an integer from 0 to 65535, found the string "eighty"/);
  assert.match(text, /listen\.http\.lean_http1: expected true or false/);
  assert.match(text, /listen\.grpc\.lean_http1: unknown key/);
  assert.match(text, /nodes\[0\]\.providers\[0\]\.capacity: expected an integer from 0 to 1000000, found number -1/);
  assert.match(text, /nodes\[0\]\.providers\[0\]\.type: expected one of ollama \| vllm \| openai_compat \| cli/);
  assert.match(text, /models\[0\]\.providers\.p9: no provider with this id/);
  assert.match(text, /\(root\)\.surprise: unknown key/);
});

test('duplicate ids and a heartbeat timeout not above the interval are rejected', () => {
  const problems = problemsOf({
    heartbeat: { interval_ms: 1000, timeout_ms: 1000 },
    nodes: [
      { id: 'n1', token: 't', providers: [{ id: 'p1' }] },
      { id: 'n1', token: 't', providers: [{ id: 'p1' }] },
    ],
    models: [],
  });
  assert.ok(problems.some((p) => p.startsWith('nodes: duplicate id "n1"')));
  assert.ok(problems.some((p) => p.startsWith('nodes[].providers: duplicate id "p1"')));
  assert.ok(problems.some((p) => p.startsWith('heartbeat.timeout_ms')));
});

test('two nodes sharing a token are refused: either agent could register as the other', () => {
  const problems = problemsOf({
    nodes: [
      { id: 'n1', token: 'shared-secret-token', providers: [{ id: 'p1' }] },
      { id: 'n2', token: 'own-secret-token', providers: [{ id: 'p2' }] },
      { id: 'n3', token: 'shared-secret-token', providers: [{ id: 'p3' }] },
    ],
    models: [],
  });
  assert.deepEqual(problems, ['nodes[2].token: the same as nodes[0].token (value not shown: it is a secret); each node needs its own, since the token is what proves which node an agent is']);
});

test('workers.count defaults to one worker per core on hosts with 4 or more, single-thread below', async () => {
  const { defaultWorkerCount } = await import('../../src/main/config.js');
  assert.equal(defaultWorkerCount(2), 0);
  assert.equal(defaultWorkerCount(4), 4);
  assert.equal(defaultWorkerCount(16), 16);
  assert.equal(defaultWorkerCount(256), 64);
});

test('runtime.node_flags: auto by default, a list of heap and GC-thread flags, its mistakes named; a change needs a restart', async () => {
  const { availableParallelism } = await import('node:os');
  const { autoNodeFlags } = await import('../../src/shared/node-flags.js');
  const { ruleFor } = await import('../../src/main/refresh/mutability.js');
  const base = { nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1' }] }], models: [] };
  assert.deepEqual(parseEdgeConfig(base, 't').runtime?.nodeFlags, autoNodeFlags(availableParallelism()));
  assert.deepEqual(parseEdgeConfig({ ...base, runtime: { node_flags: 'auto' } }, 't').runtime?.nodeFlags, autoNodeFlags(availableParallelism()));
  assert.deepEqual(parseEdgeConfig({ ...base, runtime: { node_flags: [] } }, 't').runtime?.nodeFlags, []);
  assert.deepEqual(parseEdgeConfig({ ...base, runtime: { node_flags: ['--max-old-space-size=2048'] } }, 't').runtime?.nodeFlags, ['--max-old-space-size=2048']);
  const text = problemsOf({ ...base, runtime: { node_flags: ['--inspect=0.0.0.0', 7], extra: 1 } }).join('\n');
  assert.match(text, /runtime\.node_flags\[0\]: expected one of --v8-pool-size=<integer>, --max-semi-space-size=<integer>, --max-old-space-size=<integer>, --initial-old-space-size=<integer>, --\[no-\]external-memory-accounted-in-global-limit; got '--inspect=0\.0\.0\.0'/);
  assert.match(text, /runtime\.node_flags\[1\]: expected a string, got 7/);
  assert.match(text, /runtime\.extra: unknown key/);
  assert.match(problemsOf({ ...base, runtime: { node_flags: 'fast' } }).join('\n'), /runtime\.node_flags: expected 'auto' or a list of flags, got "fast"/);
  assert.equal(ruleFor('runtime.node_flags').mutable, false);
});

test('resilience: defaults when absent, percentages as shares, and its mistakes named', async () => {
  const { outlierPolicyOf, overloadPolicyOf } = await import('../../src/main/config-resilience.js');
  const base = { nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1' }] }], models: [{ alias: 'm', providers: { p1: 's' } }] };
  const plain = parseEdgeConfig(base, 'test.yaml');
  assert.deepEqual(plain.resilience, {
    outliers: { consecutiveFailures: 5, baseEjectionMs: 30_000, maxEjectionMs: 300_000, maxEjectionShare: 0.5, failureRate: 0.5, failureRateWindow: 20, failureRateMinRequests: 10 },
    overload: { defaultRetryAfterMs: 1_000, maxRetryAfterMs: 60_000, maxRequeues: 3 },
  });
  const tuned = parseEdgeConfig({ ...base, resilience: { outliers: { consecutive_failures: 3, max_ejection_percent: 25, failure_rate_percent: 0 }, overload: { max_requeues: 0 } } }, 'test.yaml');
  assert.equal(outlierPolicyOf(tuned).consecutiveFailures, 3);
  assert.equal(outlierPolicyOf(tuned).maxEjectionShare, 0.25);
  assert.equal(outlierPolicyOf(tuned).failureRate, 0, 'failure-rate ejection off');
  assert.equal(outlierPolicyOf(tuned).jitter, 0.1, 'what the file cannot set keeps its default');
  assert.equal(overloadPolicyOf(tuned).defaultRetryAfterMs, 1_000);
  assert.equal(tuned.resilience?.overload.maxRequeues, 0);
  assert.deepEqual(problemsOf({ ...base, resilience: { outliers: { base_ejection_ms: 5_000, max_ejection_ms: 1_000, failure_rate_window: 5, failure_rate_min_requests: 6 }, surprise: 1 } }), [
    'resilience.surprise: unknown key (known: outliers, overload)',
    'resilience.outliers.max_ejection_ms: must be at least base_ejection_ms',
    'resilience.outliers.failure_rate_min_requests: must not exceed failure_rate_window',
  ]);
});

test('a2a: agents get card defaults; a missing alias, a bad id, duplicates and bad modes are reported', async () => {
  const example = await loadEdgeConfig(fileURLToPath(new URL('../../../examples/edge.yaml', import.meta.url)));
  assert.deepEqual(example.a2a?.agents.map((a) => [a.id, a.model]), [['chat', 'llama3'], ['agent', 'agent']]);
  const base = { nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1' }] }], models: [{ alias: 'm', providers: { p1: 's' } }] };
  const parsed = parseEdgeConfig({ ...base, a2a: { agents: [{ id: 'helper', model: 'm' }] } }, 'test.yaml');
  assert.deepEqual(parsed.a2a?.agents[0], {
    id: 'helper', model: 'm', name: 'helper', description: 'Runs tasks on the model m', inputModes: ['text/plain'], outputModes: ['text/plain'],
    skills: [{ id: 'helper', name: 'helper', description: 'Runs tasks on the model m', tags: [], examples: [] }],
  });
  assert.equal(parsed.a2a?.taskTtlMs, 3_600_000);
  assert.equal(parsed.a2a?.maxTasks, 10_000);
  assert.deepEqual([parsed.a2a?.historyMaxTurns, parsed.a2a?.historyMaxBytes], [20, 262_144]);
  assert.deepEqual(parseEdgeConfig(base, 'test.yaml').a2a?.agents, []);
  const text = problemsOf({
    ...base,
    a2a: { agents: [{ id: 'a b', model: 'nope' }, { id: 'x', model: 'm', input_modes: ['plain'] }, { id: 'x', model: 'm' }, { id: 'y', model: 'm', skills: [], output_modes: [] }], task_ttl_ms: 5, public_url: 'ftp://x' },
  }).join('\n');
  assert.match(text, /a2a\.agents\[0\]\.id: expected letters, digits/);
  assert.match(text, /a2a\.agents\[0\]\.model: no model with alias "nope"/);
  assert.match(text, /a2a\.agents\[1\]\.input_modes\[0\]: expected a media type/);
  assert.match(text, /a2a\.agents: duplicate id "x"/);
  assert.match(text, /a2a\.agents\[3\]\.skills: an empty list; leave it out for the default/);
  assert.match(text, /a2a\.agents\[3\]\.output_modes: an empty list/);
  assert.doesNotMatch(text, /a2a\.agents\[3\]\.input_modes/);
  assert.match(text, /a2a\.task_ttl_ms: expected an integer from 1000/);
  assert.match(text, /a2a\.public_url: expected an http\(s\) URL/);
});

test('cors: origins as browsers send them, or `*` alone; anything else is reported', () => {
  const base = { nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1' }] }], models: [{ alias: 'm', providers: { p1: 's' } }] };
  assert.equal(parseEdgeConfig(base, 'test.yaml').cors, undefined);
  const parsed = parseEdgeConfig({ ...base, cors: { allowed_origins: ['https://app.example.com', 'HTTP://LOCALHOST:5173', 'https://app.example.com', 'chrome-extension://abcdef'] } }, 'test.yaml');
  assert.deepEqual(parsed.cors, { allowedOrigins: ['https://app.example.com', 'http://localhost:5173', 'chrome-extension://abcdef'], maxAgeS: 600 });
  assert.deepEqual(parseEdgeConfig({ ...base, cors: { allowed_origins: ['*'], max_age_s: 60 } }, 'test.yaml').cors, { allowedOrigins: ['*'], maxAgeS: 60 });
  const text = problemsOf({ ...base, cors: { allowed_origins: ['https://app.example.com/', 'https://a.example:443', 'app.example.com', '', 7], max_age_s: -1, credentials: true } }).join('\n');
  assert.match(text, /cors\.allowed_origins\[0\]: expected an origin: scheme:\/\/host\[:port\] with no path/);
  assert.match(text, /cors\.allowed_origins\[1\]: browsers send this origin as "https:\/\/a\.example"; write it that way/);
  assert.match(text, /cors\.allowed_origins\[2\]: expected an origin/);
  assert.match(text, /cors\.allowed_origins\[3\]: expected an origin such as/);
  assert.match(text, /cors\.allowed_origins\[4\]: expected an origin such as/);
  assert.match(text, /cors\.max_age_s: expected an integer from 0/);
  assert.match(text, /cors\.credentials: unknown key/);
  assert.match(problemsOf({ ...base, cors: { allowed_origins: ['*', 'https://a.example'] } }).join('\n'), /cors\.allowed_origins: `\*` allows every origin; list it alone/);
});

test('node and provider ids: printable ASCII, since every answer carries them in x-edge-node and x-edge-provider', () => {
  const raw = (node: string, provider: string): unknown => ({ nodes: [{ id: node, token: 't', providers: [{ id: provider }] }], models: [{ alias: 'm', providers: { [provider]: 's' } }] });
  assert.deepEqual(parseEdgeConfig(raw('gpu-1 east', 'p.1_a'), 'test.yaml').nodes.map((n) => [n.id, n.providers[0].id]), [['gpu-1 east', 'p.1_a']]);
  const text = problemsOf(raw('gpu\n1', 'gpu-東京')).join('\n');
  assert.match(text, /nodes\[0\]\.id: expected printable ASCII \(it is sent in the x-edge-node and x-edge-provider response headers\), found the string "gpu\\n1"/);
  assert.match(text, /nodes\[0\]\.providers\[0\]\.id: expected printable ASCII .*found the string "gpu-東京"/);
  const dots = problemsOf(raw('..', '.')).join('\n');
  assert.match(dots, /nodes\[0\]\.id: "\.\." is a dot segment; admin and bootstrap URLs cannot name it/);
  assert.match(dots, /nodes\[0\]\.providers\[0\]\.id: "\." is a dot segment/);
  assert.deepEqual(parseEdgeConfig(raw('...', '.p'), 'test.yaml').nodes.map((n) => [n.id, n.providers[0].id]), [['...', '.p']]);
});

test('an admin token with whitespace is refused: no Bearer header could carry it', () => {
  for (const token of ['two words', 'with-newline\n']) {
    const text = problemsOf({ admin: { token }, nodes: [{ id: 'n1', token: 't', providers: [{ id: 'p1' }] }], models: [{ alias: 'm', providers: { p1: 'served' } }] }).join('\n');
    assert.match(text, /admin\.token: must not contain whitespace/);
    assert.ok(!text.includes(token.trim()), 'the value is not repeated');
  }
});

test('a token of the wrong type is refused without its value: YAML reads token: 12345678 as a number', () => {
  const problems = problemsOf({
    listen: { grpc: { host: '127.0.0.1' } },
    admin: { token: 48151623 },
    bootstrap: { listen: { port: 0 }, artifact_dir: '/tmp', token: 42424242424242 },
    nodes: [{ id: 'n1', token: 12345678, providers: [{ id: 'p1' }] }],
    models: [{ alias: 'm', providers: { p1: 'served' } }],
  });
  const text = problems.join('\n');
  for (const path of ['admin.token', 'bootstrap.token', 'nodes[0].token']) assert.match(text, new RegExp(`${path.replace(/[[\].]/g, '\\$&')}: expected a non-empty string \\(value not shown: it is a secret\\)`));
  for (const digits of ['12345678', '48151623', '42424242424242']) assert.ok(!text.includes(digits), `the value ${digits} is not repeated:\n${text}`);
});

test('a YAML syntax error on a secret is reported without the secret (check-config, startup and refresh answers show it)', () => {
  const text = (token: string) => `nodes:\n  - id: n1\n    token: ${token}\n    providers: [{ id: p1 }]\nmodels: [{ alias: m, providers: { p1: s } }]\n`;
  for (const token of ['*n0de-secret-token-77', '|n0de-secret-token-77', '>n0de-secret-token-77', '"n0de-secret-token-77"x', 'n0de-secret-token-77: x', '"\\Un0de-secret-token-77"']) {
    assert.throws(() => parseEdgeConfigText(text(token), 'test.yaml'), (err: unknown) => {
      assert.ok(err instanceof ConfigError && /not valid YAML: /.test(err.message), String(err));
      assert.ok(!err.message.includes('n0de-'), err.message);
      return true;
    });
  }
  // What it says still places the mistake.
  assert.throws(() => parseEdgeConfigText(text('|n0de-secret-token-77'), 'test.yaml'), /not valid YAML: Block scalar header includes extra characters at line 3, column 13/);
});

test('a tag on a secret\'s line (token: !…) prints no parser warning quoting it; the empty value it leaves is refused', async () => {
  const warnings: string[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning.message);
  process.on('warning', onWarning);
  try {
    const text = 'nodes:\n  - id: n1\n    token: !n0de-secret-token-77\n    providers: [{ id: p1 }]\nmodels: [{ alias: m, providers: { p1: s } }]\n';
    assert.throws(() => parseEdgeConfigText(text, 'test.yaml'), (err: unknown) => err instanceof ConfigError && /nodes\[0\]\.token/.test(err.message) && !err.message.includes('n0de-'));
    // Process warnings are emitted on a later turn.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  assert.deepEqual(warnings.filter((w) => w.includes('n0de-')), []);
});

test('a provider that lists its models is checked against the served names the aliases send it', () => {
  const raw = (served: string) => ({
    nodes: [{ id: 'n1', token: 'node-token-1', providers: [{ id: 'p1', models: ['llama3:8b', 'llama3:70b'] }, { id: 'p2' }] }],
    models: [{ alias: 'chat', providers: { p1: served, p2: 'anything' } }],
  });
  const config = parseEdgeConfig(raw('llama3:8b'), 'test.yaml');
  assert.deepEqual(config.nodes[0].providers[0].models, ['llama3:8b', 'llama3:70b']);
  assert.equal(config.nodes[0].providers[1].models, undefined, 'a provider that lists none is not checked');
  assert.deepEqual(problemsOf(raw('llama3-8b')), [
    'models[0].providers.p1: "llama3-8b" is not a model that provider serves (nodes[0].providers[0].models: "llama3:8b", "llama3:70b")',
  ]);
});

test('configs that parse but cannot work are refused: a model with no provider, two listeners on one port, V8 sizes too small to run', () => {
  const problems = problemsOf({
    listen: { http: { port: 18080 }, grpc: { host: '0.0.0.0', port: 18080 } },
    admin: { port: 18090 },
    bootstrap: { listen: { host: '127.0.0.1', port: 18090 }, artifact_dir: '/tmp', token: 'a-bootstrap-token-long-enough', edge_address: 'edge.example:18080' },
    runtime: { node_flags: ['--max-old-space-size=1', '--max-semi-space-size=0', '--max-semi-space-size=16', '--v8-pool-size=0'] },
    nodes: [
      { id: 'n1', token: 'node-token-one-long', labels: ['n2', 'n1', 'gpu'], providers: [{ id: 'p1' }] },
      { id: 'n2', token: 'node-token-two-long', providers: [{ id: 'p2' }] },
    ],
    models: [{ alias: 'empty', providers: {} }, { alias: 'fine', providers: { p1: 'm' } }],
  });
  const text = problems.join('\n');
  assert.match(text, /models\[0\]\.providers: names no provider/);
  assert.doesNotMatch(text, /models\[1\]/);
  // A label that is another node's id is allowed: a reference names the id first (docs/operations.md, "Node references").
  assert.doesNotMatch(text, /labels/);
  assert.match(text, /listen\.grpc\.port: 18080 is also listen\.http\.port/);
  assert.match(text, /bootstrap\.listen\.port: 18090 is also admin\.port/);
  assert.match(text, /runtime\.node_flags\[0\]: --max-old-space-size must be at least 64 \(MB\)/);
  assert.match(text, /runtime\.node_flags\[1\]: --max-semi-space-size must be at least 1 \(MB\)/);
  // --v8-pool-size=0 is Node's own "one per core": allowed.
  assert.doesNotMatch(text, /node_flags\[2\]|node_flags\[3\]/);
  assert.equal(problems.length, 5, text);
  // Port 0 (a fresh one each), and one port on two distinct addresses, are fine.
  parseEdgeConfig({ listen: { http: { port: 0 }, grpc: { port: 0 } }, admin: { port: 0 }, nodes: [], models: [] }, 'ok.yaml');
  parseEdgeConfig({ listen: { http: { host: '127.0.0.1', port: 18080 }, grpc: { host: '127.0.0.2', port: 18080 } }, nodes: [], models: [] }, 'ok.yaml');
  // The IPv4 wildcard and an IPv6 address bind side by side; the dual-stack wildcard covers both families.
  parseEdgeConfig({ listen: { http: { host: '0.0.0.0', port: 18080 }, grpc: { host: '::1', port: 18080 } }, nodes: [], models: [] }, 'ok.yaml');
  assert.match(problemsOf({ listen: { http: { host: '::', port: 18080 }, grpc: { host: '127.0.0.1', port: 18080 } }, nodes: [], models: [] }).join('\n'), /listen\.grpc\.port: 18080 is also listen\.http\.port/);
});

test('localhost and a loopback address it resolves to on one port are refused, as they fail at start', () => {
  // `localhost` binds 127.0.0.1 or ::1: either beside it on the same port is EADDRINUSE at start, so check-config must say so.
  for (const [a, b] of [['localhost', '127.0.0.1'], ['::1', 'localhost'], ['LocalHost', 'localhost']]) {
    const text = problemsOf({ listen: { http: { host: a, port: 18080 } }, admin: { host: b, port: 18080 }, nodes: [], models: [] }).join('\n');
    assert.match(text, /admin\.port: 18080 is also listen\.http\.port/, `${a} and ${b}`);
  }
  // Another loopback address is another socket.
  parseEdgeConfig({ listen: { http: { host: 'localhost', port: 18080 } }, admin: { host: '127.0.0.2', port: 18080 }, nodes: [], models: [] }, 'ok.yaml');
});

test('a catalog base_url the bootstrapped agent would refuse is refused here: ending in /v1 (an ollama one in /api), with credentials, or on a cli provider', () => {
  const problems = problemsOf({
    nodes: [
      {
        id: 'n1',
        token: 'node-token-one-long',
        providers: [
          { id: 'p1', base_url: 'https://api.example.com/v1' },
          { id: 'p2', base_url: 'http://user:pw@gpu:8000' },
          { id: 'p3', type: 'cli', base_url: 'http://gpu:8000' },
          { id: 'p4', base_url: 'http://gpu:8000' },
          { id: 'p5', type: 'ollama', base_url: 'http://gpu:11434/api' },
        ],
      },
    ],
    models: [{ alias: 'm', providers: { p4: 'm' } }],
  });
  assert.equal(problems.length, 4, problems.join('\n'));
  assert.match(problems[3], /^nodes\[0\]\.providers\[4\]\.base_url: ends in \/api/);
  assert.match(problems[0], /^nodes\[0\]\.providers\[0\]\.base_url: ends in \/v1/);
  assert.match(problems[1], /^nodes\[0\]\.providers\[1\]\.base_url: must not hold credentials/);
  assert.match(problems[2], /^nodes\[0\]\.providers\[2\]\.base_url: a cli provider runs a command on its node and has no base_url/);
});

test('a cli provider in the catalog serves chat only: endpoints naming another API are refused', () => {
  const problems = problemsOf({
    nodes: [{ id: 'n1', token: 'node-token-one-long', providers: [{ id: 'p1', type: 'cli', endpoints: ['responses', 'chat'] }] }],
    models: [{ alias: 'm', providers: { p1: 'm' } }],
  });
  assert.deepEqual(problems, ['nodes[0].providers[0].endpoints[0]: a cli provider answers as chat completions only, so it serves chat alone (found responses)']);
});

test("a refresh of a provider's endpoints says that the agent's announced list wins, not that it applies at once", async () => {
  const { ruleFor } = await import('../../src/main/refresh/mutability.js');
  const endpoints = ruleFor('nodes[gpu-1].providers[gpu-1-mock].endpoints');
  assert.equal(endpoints.mutable, true);
  assert.match(endpoints.effect, /only for a node whose agent announces no list of its own: an agent's announced list wins/);
  assert.match(ruleFor('nodes[gpu-1].providers[gpu-1-mock].capacity').effect, /apply at once/);
});

test("ids a config refresh could not name are refused: '[' or ']' in a node, provider, alias or API key name", () => {
  const problems = problemsOf({
    auth: { api_keys: [{ name: 'team[a]', key_sha256: 'a'.repeat(64) }] },
    nodes: [{ id: 'rack[1]-gpu', token: 'node-token-one-long', providers: [{ id: 'p]1' }, { id: 'p2' }] }],
    models: [{ alias: 'm[beta]', providers: { p2: 'm' } }],
  });
  const text = problems.join('\n');
  assert.match(text, /nodes\[0\]\.id: "rack\[1\]-gpu" holds '\[' or '\]'/);
  assert.match(text, /nodes\[0\]\.providers\[0\]\.id: "p\]1" holds/);
  assert.match(text, /models\[0\]\.alias: "m\[beta\]" holds/);
  assert.match(text, /auth\.api_keys\[0\]\.name: "team\[a\]" holds/);
  assert.equal(problems.length, 4, text);
});

test('a node id longer than 256 characters is refused: it goes out in the x-edge-node header of every answer', () => {
  const raw = (id: string): unknown => ({ nodes: [{ id, token: 't', providers: [{ id: 'p' }] }], models: [{ alias: 'm', providers: { p: 's' } }] });
  assert.equal(parseEdgeConfig(raw('n'.repeat(256)), 'test.yaml').nodes[0].id.length, 256);
  assert.match(problemsOf(raw('n'.repeat(70_000))).join('\n'), /nodes\[0\]\.id: 70000 characters; at most 256/);
});

test('a provider id or a provider count the edge would refuse at Register is refused here: the node could never connect', () => {
  const raw = (ids: readonly string[]): unknown => ({ nodes: [{ id: 'n', token: 't', providers: ids.map((id) => ({ id })) }], models: [{ alias: 'm', providers: { [ids[0]]: 's' } }] });
  assert.equal(parseEdgeConfig(raw(['p'.repeat(256)]), 'test.yaml').nodes[0].providers[0].id.length, 256);
  assert.match(problemsOf(raw(['p'.repeat(257)])).join('\n'), /nodes\[0\]\.providers\[0\]\.id: 257 characters; at most 256/);
  assert.equal(parseEdgeConfig(raw(Array.from({ length: 1024 }, (_, i) => `p${i}`)), 'test.yaml').nodes[0].providers.length, 1024);
  assert.match(problemsOf(raw(Array.from({ length: 1025 }, (_, i) => `p${i}`))).join('\n'), /nodes\[0\]\.providers: 1025 providers; at most 1024/);
});

test('an empty endpoints list is refused: the provider would hold its connection and never get a request', () => {
  const problems = problemsOf({
    nodes: [{ id: 'n1', token: 'node-token-one-long', providers: [{ id: 'p1', type: 'vllm', base_url: 'http://h:1', endpoints: [] }] }],
    models: [{ alias: 'm', providers: { p1: 'm' } }],
  });
  assert.deepEqual(problems, ["nodes[0].providers[0].endpoints: an empty list serves no API, so the provider would never get a request; leave endpoints out for its type's defaults"]);
});

test('one secret in two roles is refused, naming both and showing neither: admin, bootstrap, node tokens and client keys', async () => {
  const { createHash } = await import('node:crypto');
  const shared = 'a-secret-used-twice-0123456789';
  const problems = problemsOf({
    admin: { host: '127.0.0.1', port: 9090, token: shared },
    bootstrap: { listen: { host: '127.0.0.1', port: 8443 }, token: 'bootstrap-secret-0123456789', artifact_dir: '/tmp' },
    nodes: [
      { id: 'n1', token: shared, providers: [{ id: 'p1' }] },
      { id: 'n2', token: 'bootstrap-secret-0123456789', providers: [{ id: 'p2' }] },
      { id: 'n3', token: 'node-three-secret-0123456789', providers: [{ id: 'p3' }] },
    ],
    models: [{ alias: 'm', providers: { p1: 'm' } }],
    auth: { api_keys: [{ name: 'app', key_sha256: createHash('sha256').update('node-three-secret-0123456789').digest('hex') }] },
  });
  assert.deepEqual(problems.filter((p) => p.includes('the same secret')), [
    'nodes[0].token: the same secret as admin.token (value not shown); each role needs its own, or whoever holds one could act as the other',
    'nodes[1].token: the same secret as bootstrap.token (value not shown); each role needs its own, or whoever holds one could act as the other',
    'nodes[2].token: the same secret as the client API key "app" (auth.api_keys[].key_sha256; value not shown); each role needs its own, or a client could act as the other',
  ]);
  assert.ok(problems.every((p) => !p.includes(shared)), 'no secret in a message');
});

test("a node agent's config given to the edge is named as one, in one line", () => {
  assert.deepEqual(problemsOf({ edge: { address: 'edge:50051' }, node: { id: 'n1', token: 'a-node-token-0123456789' }, providers: [{ id: 'p1', type: 'ollama', base_url: 'http://127.0.0.1:11434' }] }), [
    "this is a node agent's config (it has edge, node and providers; an edge's has listen, nodes and models): check it with `node-agent check-config FILE` (npm run node-agent -- check-config FILE)",
  ]);
});
