// Turns an OpenAI chat request body into what a cli provider's command gets:
// the text of the last user message, or the whole messages array as JSON.
// A body the command cannot be given anything from is the client's mistake
// (400), told before any process starts.
import type { CliPrompt } from './cli-config.js';

export class CliRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliRequestError';
  }
}

interface ChatMessage {
  readonly role?: unknown;
  readonly content?: unknown;
}

export function extractPrompt(body: Uint8Array, mode: CliPrompt): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch {
    throw new CliRequestError('the request body is not JSON');
  }
  const messages = (parsed as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) throw new CliRequestError('`messages` must be an array of chat messages');
  if (mode === 'messages_json') return JSON.stringify(messages);
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i] as ChatMessage | null;
    if (message?.role === 'user') return textOf(message.content);
  }
  throw new CliRequestError('`messages` holds no user message to give the command');
}

/** A string content, or the text parts of an array content joined by newlines. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new CliRequestError('a user message needs a string or an array of text parts as `content`');
  const parts: string[] = [];
  for (const part of content as { type?: unknown; text?: unknown }[]) {
    if (part?.type === 'text' && typeof part.text === 'string') parts.push(part.text);
  }
  // Images, audio, files: a command line takes text only, and running it on nothing bills a run for no answer.
  if (parts.length === 0) throw new CliRequestError('the last user message has no text part to give the command (a cli provider takes text only)');
  return parts.join('\n');
}
