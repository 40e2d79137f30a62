// The offload pool's worker: inspectBody on a body moved in from the thread
// that owns the connection, plus the exact prompt token count. The body's
// memory is moved back with the verdict (never copied in either direction).
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { inspectBody, type InspectResult } from '../http/inspect.js';
import { batchInputTokens, countPromptTokens } from './prompt-tokens.js';

export interface InspectTask {
  /** Holds the body in [0, byteLength); transferred to this thread. */
  readonly buffer: ArrayBuffer;
  readonly byteLength: number;
  readonly maxDepth: number;
  /** Also count the prompt's tokens (valid bodies only). */
  readonly countTokens: boolean;
  /** A list input is a batch (embeddings, completions): counted as batchInputTokens says. */
  readonly batchInputs: boolean;
  /** scheduler.long_context_threshold_tokens, which a batch's count is taken against (batchInputTokens). */
  readonly longThreshold: number;
}

export interface InspectTaskReply {
  readonly result: InspectResult;
  /** The task's buffer, transferred back. */
  readonly buffer: ArrayBuffer;
}

export default function inspectTask(task: InspectTask): unknown {
  const body = Buffer.from(task.buffer, 0, task.byteLength);
  let result = inspectBody(body, task.maxDepth);
  if (result.ok && task.countTokens) {
    const inputTokens = countedOrNot(body, task.batchInputs, task.longThreshold);
    if (inputTokens >= 0) result = { ...result, inputTokens };
  }
  const reply: InspectTaskReply = { result, buffer: task.buffer };
  return move({ [transferableSymbol]: task.buffer, [valueSymbol]: reply } as never);
}

/** The count is a scheduling hint: should it fail, the request keeps its byte estimate rather than failing too. */
function countedOrNot(body: Buffer, batchInputs: boolean, longThreshold: number): number {
  try {
    return batchInputs ? batchInputTokens(body, longThreshold) : countPromptTokens(body);
  } catch {
    return -1;
  }
}
