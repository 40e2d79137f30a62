// `edge hash-key [KEY]`: prints the sha256 hex of an API key, the value
// `auth.api_keys[].key_sha256` takes. Without KEY it reads the key from
// stdin (first line), so the key stays out of shell history.
import { createInterface } from 'node:readline';
import { sha256Hex } from '../workers/http/client-auth.js';

async function firstLine(): Promise<string> {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return '';
}

export async function runHashKey(key: string | undefined): Promise<number> {
  const text = (key ?? (await firstLine())).trim();
  if (text === '') {
    console.error('edge hash-key: no key given (pass it as an argument or on stdin)');
    return 2;
  }
  console.log(sha256Hex(text));
  return 0;
}
