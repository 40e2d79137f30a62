// `npm start`: the embedded demo. Mock provider + edge + node agent on
// loopback, from examples/, in one process (the agent's cli provider runs
// examples/cli-agent.mjs); prints curl lines that work and the operator
// console's URL (the admin listener always runs here).
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { loadAgentConfig } from '../agent/config.js';
import { NodeAgent } from '../agent/agent.js';
import { DEFAULT_ADMIN_PORT, loadEdgeConfig } from '../main/config.js';
import { startEdge } from '../edge/edge.js';
import { startMockProvider } from '../mock/provider.js';
import { createLogger, logLevelEnvProblem } from '../shared/logger.js';
import { dialAddress } from '../shared/url-host.js';

const examples = (name: string): string => fileURLToPath(new URL(`../../../examples/${name}`, import.meta.url));

/** DEMO_HTTP_PORT, DEMO_GRPC_PORT, DEMO_ADMIN_PORT, DEMO_MOCK_PORT override the examples' ports (0 = any free port). */
function portFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${name} must be a port number, got ${JSON.stringify(text)}`);
  return port;
}

/** The ports asked for, by the variable that moves each: an address in use is answered with the one to set. */
const wanted = new Map<number, string>();

function portHint(err: unknown): string | undefined {
  const text = err instanceof Error ? err.message : String(err);
  if (!/EADDRINUSE/.test(text)) return undefined;
  for (const [port, name] of wanted) {
    if (port !== 0 && new RegExp(`:${port}\\b`).test(text)) return `port ${port} is already in use (another demo or gateway running?). Stop it, or move this one: ${name}=<port> npm start (0 = any free port).`;
  }
  return `a port is already in use. Move the demo's ports with DEMO_HTTP_PORT, DEMO_GRPC_PORT, DEMO_ADMIN_PORT, DEMO_MOCK_PORT (0 = any free port).`;
}

async function main(): Promise<void> {
  const level = process.env.LOG_LEVEL ?? 'warn';
  const levelProblem = logLevelEnvProblem(level);
  if (levelProblem !== undefined) throw new Error(levelProblem);
  const logger = createLogger('demo', level);
  const exampleAgent = await loadAgentConfig(examples('node-agent.yaml'));
  const exampleEdge = await loadEdgeConfig(examples('edge.yaml'));
  const mockBase = new URL(exampleAgent.providers.find((p) => p.baseUrl)?.baseUrl ?? 'http://127.0.0.1:9000');
  const mockPort = portFromEnv('DEMO_MOCK_PORT', Number(mockBase.port));
  wanted.set(mockPort, 'DEMO_MOCK_PORT');
  const mock = await startMockProvider({ port: mockPort, ttftMs: 100, tokens: 12, intervalMs: 60 });
  const edgeConfig = {
    ...exampleEdge,
    http: { ...exampleEdge.http, port: portFromEnv('DEMO_HTTP_PORT', exampleEdge.http.port) },
    grpc: { ...exampleEdge.grpc, port: portFromEnv('DEMO_GRPC_PORT', exampleEdge.grpc.port) },
    // The console lives on the admin listener: the demo runs it even if the example config had none.
    admin: { host: '127.0.0.1', token: undefined, ...exampleEdge.admin, port: portFromEnv('DEMO_ADMIN_PORT', exampleEdge.admin?.port ?? DEFAULT_ADMIN_PORT) },
  };
  wanted.set(edgeConfig.http.port, 'DEMO_HTTP_PORT');
  wanted.set(edgeConfig.grpc.port, 'DEMO_GRPC_PORT');
  wanted.set(edgeConfig.admin.port, 'DEMO_ADMIN_PORT');
  let edge: Awaited<ReturnType<typeof startEdge>>;
  try {
    edge = await startEdge(edgeConfig, { logger: createLogger('edge', level), admin: true });
  } catch (err) {
    await mock.close();
    throw err;
  }
  const agentConfig = {
    ...exampleAgent,
    edge: { ...exampleAgent.edge, address: dialAddress(edgeConfig.grpc.host, edge.grpcPort) },
    providers: exampleAgent.providers.map((p) => {
      if (p.baseUrl) return { ...p, baseUrl: mock.url };
      // The example's command, run by this very node binary from this checkout.
      if (p.cli) return { ...p, cli: { ...p.cli, command: [process.execPath, examples('cli-agent.mjs')] } };
      return p;
    }),
  };
  const agent = new NodeAgent(agentConfig, { logger: createLogger('node-agent', level) });
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
  const body = JSON.stringify({ model: 'llama3', messages: [{ role: 'user', content: 'Hello!' }] });
  // A page the example config lets call the API from a browser: its preflight, as the browser sends it.
  const cors = edgeConfig.cors?.allowedOrigins.find((o) => o !== '*');
  const agentBody = JSON.stringify({ model: 'agent', stream: true, messages: [{ role: 'user', content: 'Hello, agent!' }] });
  // A2A 1.0 JSON-RPC, as the @a2a-js/sdk client sends it (README "A2A" has the SDK version).
  const a2aBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'demo-1', contextId: 'demo-a2a', role: 'ROLE_USER', parts: [{ text: 'Hello, agent!' }] } } });
  console.log(`demo ready: edge ${edge.url} (gRPC :${edge.grpcPort}), node agent gpu-1, mock provider ${mock.url}

operator console: ${edge.adminUrl}/console${edgeConfig.admin.token === undefined ? ' (no admin token on loopback: it opens without a login)' : ' (log in with admin.token)'}

try:
  curl -s ${edge.url}/v1/chat/completions -H 'content-type: application/json' -d '${body}'
  curl -sN ${edge.url}/v1/chat/completions -H 'content-type: application/json' -d '${body.replace('"model"', '"stream":true,"model"')}'
  curl -s ${edge.url}/v1/models
  curl -sN ${edge.url}/v1/chat/completions -H 'content-type: application/json' -H 'x-edge-session: demo' -d '${agentBody}'
  curl -s ${edge.url}/v1/messages -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' -d '${JSON.stringify({ model: 'llama3', max_tokens: 64, messages: [{ role: 'user', content: 'Hello!' }] })}'
  curl -s ${edge.url}/v1/responses -H 'content-type: application/json' -d '${JSON.stringify({ model: 'llama3', input: 'Hello!' })}'
${edge.adminUrl ? `  curl -s ${edge.adminUrl}/admin/status
  curl -s ${edge.adminUrl}/metrics
  curl -s ${edge.adminUrl}/admin/runs
` : ''}  curl -s ${edge.url}/.well-known/agent-card.json
  curl -s ${edge.url}/a2a/agent -H 'content-type: application/json' -H 'a2a-version: 1.0' -d '${a2aBody}'
${cors === undefined ? '' : `  curl -si -X OPTIONS ${edge.url}/v1/chat/completions -H 'origin: ${cors}' -H 'access-control-request-method: POST' -H 'access-control-request-headers: authorization, content-type'
`}
Ctrl-C stops it.`);
  const shutdown = (): void => {
    void agent.stop().then(() => edge.close()).then(() => mock.close()).finally(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
  logger.debug('demo running');
}

main().catch((err: unknown) => {
  const hint = portHint(err);
  console.error(hint === undefined ? (err instanceof Error ? err.message : err) : `demo: ${hint}\n(${err instanceof Error ? err.message : String(err)})`);
  process.exit(1);
});
