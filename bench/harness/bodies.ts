// Request bodies of an exact size: an OpenAI chat request whose one user
// message is padded with prose until the JSON is `bytes` long.
const PROSE = 'The quick brown fox jumps over the lazy dog while the gateway relays every byte untouched. ';

export function chatBody(model: string, bytes: number, stream = false): Buffer {
  const head = `{"model":${JSON.stringify(model)},"stream":${stream},"messages":[{"role":"user","content":"`;
  const tail = '"}]}';
  const room = bytes - Buffer.byteLength(head) - tail.length;
  if (room < 0) throw new RangeError(`chatBody: ${bytes} bytes is too small for model ${model}`);
  const content = PROSE.repeat(Math.ceil(room / PROSE.length)).slice(0, room);
  return Buffer.from(head + content + tail);
}
