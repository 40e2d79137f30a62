// Tool calls, for requests that offer tools. A chat, Messages or Responses
// request with a non-empty top-level `tools` array is answered with a call to
// its first tool, unless its last message (input item) already carries a tool
// result: then with text, as a model finishing a tool loop would. The
// arguments are MOCK_TOOL_ARGUMENTS (or x-mock-tool-arguments, a
// percent-encoded JSON object), streamed in one piece per token, in each API's
// wire format:
// - chat: delta.tool_calls[0] (id, type, name and the first piece, then one
//   arguments piece per chunk), finish_reason "tool_calls";
// - Messages: a tool_use content block (content_block_start, one
//   input_json_delta per token), stop_reason "tool_use";
// - Responses: a function_call output item (response.output_item.added, one
//   response.function_call_arguments.delta per token, .done).

/**
 * The default arguments: CJK and emoji (multi-byte UTF-8), and lures for a
 * usage scanner (the word, a `"usage":{...}` inside a string, and a real
 * nested `usage` object with counts).
 */
export const MOCK_TOOL_ARGUMENTS =
  '{"city":"東京都 🌸🍣","note":"usage","raw":"\\"usage\\":{\\"prompt_tokens\\":999,\\"completion_tokens\\":999}","usage":{"prompt_tokens":777,"completion_tokens":777,"input_tokens":777,"output_tokens":777}}';

export interface ToolCall {
  readonly name: string;
  /** The arguments, JSON text. */
  readonly arguments: string;
}

interface ToolRequest {
  tools?: unknown;
  messages?: unknown;
  input?: unknown;
}

const TOOLS_KEY = Buffer.from('"tools"');

/** The call a request gets (undefined: answer with text); throws on a bad x-mock-tool-arguments. */
export function toolCallFor(route: 'chat' | 'messages' | 'responses', body: Buffer, header: string | string[] | undefined): ToolCall | undefined {
  if (!body.includes(TOOLS_KEY)) return undefined;
  const request = JSON.parse(body.toString('utf8')) as ToolRequest;
  if (!Array.isArray(request.tools) || request.tools.length === 0) return undefined;
  const tool = request.tools[0] as { name?: unknown; function?: { name?: unknown } };
  const name = route === 'chat' ? tool.function?.name : tool.name;
  if (typeof name !== 'string' || answersToolResult(route, request)) return undefined;
  let args = MOCK_TOOL_ARGUMENTS;
  if (header !== undefined) {
    args = decodeURIComponent(Array.isArray(header) ? header[0] : header);
    JSON.parse(args);
  }
  return { name, arguments: args };
}

function answersToolResult(route: 'chat' | 'messages' | 'responses', request: ToolRequest): boolean {
  const list = route === 'responses' ? request.input : request.messages;
  if (!Array.isArray(list) || list.length === 0) return false;
  const last = list[list.length - 1] as { role?: unknown; type?: unknown; content?: unknown };
  if (route === 'chat') return last.role === 'tool';
  if (route === 'responses') return last.type === 'function_call_output';
  return Array.isArray(last.content) && last.content.some((block) => (block as { type?: unknown }).type === 'tool_result');
}

/** The arguments cut into `count` pieces of whole characters (the last ones may be empty). */
export function argumentPieces(args: string, count: number): string[] {
  const chars = Array.from(args);
  const pieces: string[] = [];
  for (let k = 0; k < count; k++) pieces.push(chars.slice(Math.floor((k * chars.length) / count), Math.floor(((k + 1) * chars.length) / count)).join(''));
  return pieces;
}

// --- OpenAI chat -------------------------------------------------------------

/** The choice of chat chunk k: the call's head with the first piece, then a piece each. */
export function chatToolChoice(callId: string, call: ToolCall, piece: string, k: number): string {
  const args = JSON.stringify(piece);
  if (k > 0) return `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":${args}}}]},"logprobs":null,"finish_reason":null}`;
  return `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"${callId}","type":"function","function":{"name":${JSON.stringify(call.name)},"arguments":${args}}}]},"logprobs":null,"finish_reason":null}`;
}

/** A whole chat answer's message. */
export function chatToolMessage(callId: string, call: ToolCall): string {
  return `{"role":"assistant","content":null,"tool_calls":[{"id":"${callId}","type":"function","function":{"name":${JSON.stringify(call.name)},"arguments":${JSON.stringify(call.arguments)}}}],"refusal":null}`;
}

// --- Anthropic Messages ------------------------------------------------------

export function toolUseBlock(id: string, call: ToolCall, whole: boolean): string {
  return `{"type":"tool_use","id":"${id}","name":${JSON.stringify(call.name)},"input":${whole ? call.arguments : '{}'}}`;
}

// --- OpenAI Responses --------------------------------------------------------

export function functionCallItem(itemId: string, callId: string, call: ToolCall, done: boolean): string {
  return `{"id":"${itemId}","type":"function_call","status":"${done ? 'completed' : 'in_progress'}","arguments":${JSON.stringify(done ? call.arguments : '')},"call_id":"${callId}","name":${JSON.stringify(call.name)}}`;
}
