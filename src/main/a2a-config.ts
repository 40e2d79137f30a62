// The `a2a` section of the edge config: which agents the A2A surface
// exposes (each runs its tasks on one model alias, a cli provider group
// included), what their Agent Cards say, and how long task records live.
// Parsed here with the rest of the config so a typo fails at start (or at
// a refresh's evaluate), never when a client first asks for the card.
import type { ConfigReader } from '../shared/config-reader.js';
import type { A2AAgentConfig, A2AConfig, A2ASkillConfig } from '../shared/config-types.js';

export const DEFAULT_A2A_TASK_TTL_MS = 3_600_000;
export const DEFAULT_A2A_MAX_TASKS = 10_000;
/** 256 Mi characters of finished tasks' text per data path. */
export const DEFAULT_A2A_MAX_TASK_BYTES = 256 * 1_048_576;
export const DEFAULT_A2A_HISTORY_MAX_TURNS = 20;
export const DEFAULT_A2A_HISTORY_MAX_BYTES = 262_144;
const DAY_MS = 86_400_000;
/** A URL segment: the agent's routes are /a2a/{id}/... */
const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** A media type such as text/plain or application/json. */
const MEDIA_TYPE = /^[a-z]+\/[A-Za-z0-9.+*-]+$/;

function strings(r: ConfigReader, path: string, raw: unknown, fallback: readonly string[], pattern?: RegExp): readonly string[] {
  if (raw === undefined) return fallback;
  const out: string[] = [];
  for (const [i, item] of r.list(path, raw).entries()) {
    const value = r.string(`${path}[${i}]`, item);
    if (pattern !== undefined && value !== '' && !pattern.test(value)) r.problem(`${path}[${i}]`, 'a media type such as text/plain', item);
    out.push(value);
  }
  return out;
}

function readSkill(r: ConfigReader, path: string, raw: unknown, agent: { id: string; name: string; description: string }): A2ASkillConfig {
  const obj = r.object(path, raw) ?? {};
  r.noUnknownKeys(path, obj, ['id', 'name', 'description', 'tags', 'examples']);
  return {
    id: r.string(`${path}.id`, obj.id, agent.id),
    name: r.string(`${path}.name`, obj.name, agent.name),
    description: r.string(`${path}.description`, obj.description, agent.description),
    tags: strings(r, `${path}.tags`, obj.tags, []),
    examples: strings(r, `${path}.examples`, obj.examples, []),
  };
}

function readAgent(r: ConfigReader, path: string, raw: unknown, aliases: ReadonlySet<string>): A2AAgentConfig | undefined {
  const obj = r.object(path, raw);
  if (obj === undefined) return undefined;
  r.noUnknownKeys(path, obj, ['id', 'model', 'name', 'description', 'input_modes', 'output_modes', 'skills']);
  const id = r.string(`${path}.id`, obj.id);
  if (id !== '' && !AGENT_ID.test(id)) r.problem(`${path}.id`, 'letters, digits, dot, dash or underscore (a URL segment, up to 64)', obj.id);
  const model = r.string(`${path}.model`, obj.model);
  if (model !== '' && !aliases.has(model)) r.problems.push(`${path}.model: no model with alias ${JSON.stringify(model)} in models[]`);
  const name = r.string(`${path}.name`, obj.name, id);
  const description = r.string(`${path}.description`, obj.description, `Runs tasks on the model ${model}`);
  const base = { id, name, description };
  // A skill is what a client picks an agent by; one is made from the agent itself when none is listed.
  const skills = obj.skills === undefined ? [readSkill(r, `${path}.skills`, {}, base)] : r.list(`${path}.skills`, obj.skills).map((s, i) => readSkill(r, `${path}.skills[${i}]`, s, base));
  const inputModes = strings(r, `${path}.input_modes`, obj.input_modes, ['text/plain'], MEDIA_TYPE);
  const outputModes = strings(r, `${path}.output_modes`, obj.output_modes, ['text/plain'], MEDIA_TYPE);
  // An empty list is a card no client can use (no skill to pick it by, no media type to send or take): leave it out for the default.
  for (const [key, list] of [['skills', skills], ['input_modes', inputModes], ['output_modes', outputModes]] as const) {
    if (list.length === 0) r.problems.push(`${path}.${key}: an empty list; leave it out for the default`);
  }
  return { id, model, name, description, inputModes, outputModes, skills };
}

export function readA2A(r: ConfigReader, raw: unknown, aliases: ReadonlySet<string>): A2AConfig {
  const obj = r.object('a2a', raw, true) ?? {};
  r.noUnknownKeys('a2a', obj, ['agents', 'task_ttl_ms', 'max_tasks', 'max_task_bytes', 'history_max_turns', 'history_max_bytes', 'public_url']);
  const agents: A2AAgentConfig[] = [];
  for (const [i, a] of r.list('a2a.agents', obj.agents, true).entries()) {
    const agent = readAgent(r, `a2a.agents[${i}]`, a, aliases);
    if (agent !== undefined) agents.push(agent);
  }
  const seen = new Set<string>();
  for (const agent of agents) {
    if (seen.has(agent.id)) r.problems.push(`a2a.agents: duplicate id ${JSON.stringify(agent.id)}`);
    seen.add(agent.id);
  }
  const publicUrl = obj.public_url === undefined ? undefined : r.url('a2a.public_url', obj.public_url).replace(/\/+$/, '');
  return {
    agents,
    taskTtlMs: r.integer('a2a.task_ttl_ms', obj.task_ttl_ms, 1_000, 7 * DAY_MS, DEFAULT_A2A_TASK_TTL_MS),
    maxTasks: r.integer('a2a.max_tasks', obj.max_tasks, 1, 1_000_000, DEFAULT_A2A_MAX_TASKS),
    maxTaskBytes: r.integer('a2a.max_task_bytes', obj.max_task_bytes, 1_048_576, 16 * 1_073_741_824, DEFAULT_A2A_MAX_TASK_BYTES),
    historyMaxTurns: r.integer('a2a.history_max_turns', obj.history_max_turns, 0, 1_000, DEFAULT_A2A_HISTORY_MAX_TURNS),
    historyMaxBytes: r.integer('a2a.history_max_bytes', obj.history_max_bytes, 1_024, 64 * 1_048_576, DEFAULT_A2A_HISTORY_MAX_BYTES),
    publicUrl,
  };
}
