// The mock's Anthropic Messages and OpenAI Responses wire formats, exactly as
// those APIs (and so their official SDKs) shape them: whole bodies, and SSE
// streams as a preamble, one event per token, and a closing sequence. The
// mock's streaming loop (exchange.ts) asks for those three pieces per API.
//
// Messages stream: message_start, content_block_start, (ping), one
// content_block_delta per token, content_block_stop, message_delta (stop
// reason and usage), message_stop.
// Responses stream: response.created, response.in_progress,
// response.output_item.added, response.content_part.added, one
// response.output_text.delta per token, response.output_text.done,
// response.content_part.done, response.output_item.done, response.completed.
import type { Usage } from './responses.js';
import { functionCallItem, toolUseBlock, type ToolCall } from './tool-calls.js';

function sse(event: string, data: string): string {
  return `event: ${event}\ndata: ${data}\n\n`;
}

// --- Anthropic Messages ------------------------------------------------------

function messageJson(id: string, modelJson: string, text: string | undefined, usage: Usage, done: boolean, tool?: ToolCall): string {
  const content = text === undefined ? '[]' : tool !== undefined ? `[${toolUseBlock(toolUseId(id), tool, true)}]` : `[{"type":"text","text":${JSON.stringify(text)}}]`;
  const stop = done ? (tool !== undefined ? '"tool_use"' : '"end_turn"') : 'null';
  return `{"id":"${id}","type":"message","role":"assistant","model":${modelJson},"content":${content},"stop_reason":${stop},"stop_sequence":null,"usage":${messageUsage(usage, done ? usage.completionTokens : 1)}}`;
}

/** Anthropic counts cached prompt tokens apart from input_tokens (and always names both cache counts). */
function messageUsage(usage: Usage, outputTokens: number): string {
  return `{"input_tokens":${usage.promptTokens - usage.cachedTokens},"cache_creation_input_tokens":0,"cache_read_input_tokens":${usage.cachedTokens},"output_tokens":${outputTokens}}`;
}

export function messageBody(id: string, modelJson: string, text: string, usage: Usage, tool?: ToolCall): string {
  return messageJson(id, modelJson, text, usage, true, tool);
}

/** The tool_use block's id, from the message's. */
function toolUseId(messageId: string): string {
  return `toolu_${messageId}`;
}

export function countTokensBody(inputTokens: number): string {
  return `{"input_tokens":${inputTokens}}`;
}

export function messagePreamble(id: string, modelJson: string, usage: Usage, tool?: ToolCall): string {
  const block = tool !== undefined ? toolUseBlock(toolUseId(id), tool, false) : '{"type":"text","text":""}';
  return (
    sse('message_start', `{"type":"message_start","message":${messageJson(id, modelJson, undefined, usage, false)}}`) +
    sse('content_block_start', `{"type":"content_block_start","index":0,"content_block":${block}}`) +
    sse('ping', '{"type": "ping"}')
  );
}

export function messageDelta(text: string, tool?: ToolCall): string {
  if (tool !== undefined) return sse('content_block_delta', `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":${JSON.stringify(text)}}}`);
  return sse('content_block_delta', `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${JSON.stringify(text)}}}`);
}

export function messageClosing(usage: Usage, tool?: ToolCall): string {
  return (
    sse('content_block_stop', '{"type":"content_block_stop","index":0}') +
    sse('message_delta', `{"type":"message_delta","delta":{"stop_reason":"${tool !== undefined ? 'tool_use' : 'end_turn'}","stop_sequence":null},"usage":{"output_tokens":${usage.completionTokens}}}`) +
    sse('message_stop', '{"type":"message_stop"}')
  );
}

/** Anthropic's error body. */
export function anthropicError(type: string, message: string): string {
  return JSON.stringify({ type: 'error', error: { type, message } });
}

// --- OpenAI Responses --------------------------------------------------------

export interface ResponseIds {
  readonly id: string;
  readonly itemId: string;
  readonly createdAt: number;
  readonly modelJson: string;
  readonly previousResponseId: string | undefined;
  /** Answer with a function_call item (see tool-calls.ts). */
  readonly tool?: ToolCall;
}

function usageJson(usage: Usage): string {
  const { promptTokens, completionTokens } = usage;
  return `{"input_tokens":${promptTokens},"input_tokens_details":{"cached_tokens":0},"output_tokens":${completionTokens},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":${promptTokens + completionTokens}}`;
}

function outputItem(ids: ResponseIds, text: string, done: boolean): string {
  if (ids.tool !== undefined) return functionCallItem(ids.itemId, `call_${ids.itemId}`, ids.tool, done);
  const content = done ? `[{"type":"output_text","text":${JSON.stringify(text)},"annotations":[],"logprobs":[]}]` : '[]';
  return `{"id":"${ids.itemId}","type":"message","status":"${done ? 'completed' : 'in_progress'}","role":"assistant","content":${content}}`;
}

/** The response object; `text` undefined while it is still in progress. */
export function responseObject(ids: ResponseIds, text: string | undefined, usage: Usage): string {
  const done = text !== undefined;
  const output = done ? `[${outputItem(ids, text, true)}]` : '[]';
  const previous = ids.previousResponseId === undefined ? 'null' : JSON.stringify(ids.previousResponseId);
  return (
    `{"id":"${ids.id}","object":"response","created_at":${ids.createdAt},"status":"${done ? 'completed' : 'in_progress'}","error":null,"incomplete_details":null,` +
    `"instructions":null,"max_output_tokens":null,"model":${ids.modelJson},"output":${output},"parallel_tool_calls":true,"previous_response_id":${previous},` +
    `"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,` +
    `"truncation":"disabled","usage":${done ? usageJson(usage) : 'null'},"user":null,"metadata":{}}`
  );
}

/** Streams number their events; the counter lives with the stream. */
export class ResponseEvents {
  #seq = 0;

  constructor(readonly ids: ResponseIds) {}

  #event(type: string, fields: string): string {
    return sse(type, `{"type":"${type}","sequence_number":${this.#seq++},${fields}}`);
  }

  preamble(usage: Usage): string {
    const inProgress = responseObject(this.ids, undefined, usage);
    if (this.ids.tool !== undefined) {
      return (
        this.#event('response.created', `"response":${inProgress}`) +
        this.#event('response.in_progress', `"response":${inProgress}`) +
        this.#event('response.output_item.added', `"output_index":0,"item":${outputItem(this.ids, '', false)}`)
      );
    }
    return (
      this.#event('response.created', `"response":${inProgress}`) +
      this.#event('response.in_progress', `"response":${inProgress}`) +
      this.#event('response.output_item.added', `"output_index":0,"item":${outputItem(this.ids, '', false)}`) +
      this.#event('response.content_part.added', `"item_id":"${this.ids.itemId}","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}`)
    );
  }

  delta(text: string): string {
    if (this.ids.tool !== undefined) return this.#event('response.function_call_arguments.delta', `"item_id":"${this.ids.itemId}","output_index":0,"delta":${JSON.stringify(text)}`);
    return this.#event('response.output_text.delta', `"item_id":"${this.ids.itemId}","output_index":0,"content_index":0,"delta":${JSON.stringify(text)},"logprobs":[]`);
  }

  closing(text: string, usage: Usage): string {
    const json = JSON.stringify(text);
    const tool = this.ids.tool;
    if (tool !== undefined) {
      return (
        this.#event('response.function_call_arguments.done', `"item_id":"${this.ids.itemId}","output_index":0,"arguments":${JSON.stringify(tool.arguments)},"name":${JSON.stringify(tool.name)}`) +
        this.#event('response.output_item.done', `"output_index":0,"item":${outputItem(this.ids, text, true)}`) +
        this.#event('response.completed', `"response":${responseObject(this.ids, text, usage)}`)
      );
    }
    return (
      this.#event('response.output_text.done', `"item_id":"${this.ids.itemId}","output_index":0,"content_index":0,"text":${json},"logprobs":[]`) +
      this.#event('response.content_part.done', `"item_id":"${this.ids.itemId}","output_index":0,"content_index":0,"part":{"type":"output_text","text":${json},"annotations":[],"logprobs":[]}`) +
      this.#event('response.output_item.done', `"output_index":0,"item":${outputItem(this.ids, text, true)}`) +
      this.#event('response.completed', `"response":${responseObject(this.ids, text, usage)}`)
    );
  }
}
