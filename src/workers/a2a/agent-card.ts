// Agent Cards, in the JSON form the @a2a-js/sdk 1.x client reads (A2A 1.0,
// ProtoJSON names). One card per configured agent, at
// /a2a/{id}/.well-known/agent-card.json, and the edge's own card at
// /.well-known/agent-card.json, which lists every agent as a skill and
// points its interface at the first agent. Each card declares the JSON-RPC
// interface (1.0, plus the same URL as 0.3 for the SDK's compatibility
// layer) and, when API keys are configured, the bearer scheme a client must
// use. A few v0.3 top-level fields (url, protocolVersion) ride along so a
// v0.3 client finds the endpoint too; a 1.0 client ignores them.
import type { A2AAgentConfig, EdgeConfig } from '../../shared/config-types.js';
import { VERSION } from '../../shared/version.js';

export const CARD_PATH = '/.well-known/agent-card.json';
export const AGENT_PREFIX = '/a2a/';
export const SECURITY_SCHEME = 'edgeApiKey';

/** The JSON-RPC endpoint of an agent, under `base` (scheme://host[:port][/prefix]). */
export function agentEndpoint(base: string, agent: A2AAgentConfig): string {
  return `${base}${AGENT_PREFIX}${agent.id}`;
}

function security(authOn: boolean): Record<string, unknown> {
  if (!authOn) return {};
  return {
    securitySchemes: {
      [SECURITY_SCHEME]: {
        httpAuthSecurityScheme: {
          scheme: 'Bearer',
          description: 'An edge API key (auth.api_keys) as `Authorization: Bearer <key>`; the same keys as the OpenAI API',
        },
      },
    },
    securityRequirements: [{ schemes: { [SECURITY_SCHEME]: { list: [] } } }],
  };
}

function interfaces(url: string): Record<string, unknown> {
  return {
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ],
    // v0.3 readers: where to post and which version is spoken there.
    url,
    protocolVersion: '0.3.0',
  };
}

const CAPABILITIES = { streaming: true, pushNotifications: false };

export function agentCard(config: EdgeConfig, agent: A2AAgentConfig, base: string): Record<string, unknown> {
  return {
    name: agent.name,
    description: agent.description,
    version: VERSION,
    provider: { organization: 'llm-edge-gateway', url: base },
    ...interfaces(agentEndpoint(base, agent)),
    capabilities: CAPABILITIES,
    ...security((config.auth?.apiKeys.length ?? 0) > 0),
    defaultInputModes: agent.inputModes,
    defaultOutputModes: agent.outputModes,
    skills: agent.skills.map((s) => ({ id: s.id, name: s.name, description: s.description, tags: s.tags, examples: s.examples, inputModes: agent.inputModes, outputModes: agent.outputModes })),
  };
}

/** The edge's own card: every agent is a skill; its interface is the first agent's. undefined when no agent is configured. */
export function edgeCard(config: EdgeConfig, base: string): Record<string, unknown> | undefined {
  const agents = config.a2a?.agents ?? [];
  if (agents.length === 0) return undefined;
  const first = agents[0];
  return {
    ...agentCard(config, first, base),
    name: 'llm-edge-gateway',
    description: `An LLM edge gateway; its agents: ${agents.map((a) => `${a.id} (${a.description})`).join('; ')}. Each has its own card at ${base}${AGENT_PREFIX}{id}${CARD_PATH}; this card's interface is ${first.id}'s.`,
    skills: agents.map((a) => ({ id: a.id, name: a.name, description: a.description, tags: ['agent', a.model], examples: [], inputModes: a.inputModes, outputModes: a.outputModes })),
  };
}
