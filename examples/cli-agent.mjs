// The demo's command-line "agent" behind the `agent` model (a `type: cli`
// provider in node-agent.yaml). The node agent runs it once per request,
// with the prompt on stdin, in the session's own working directory; what it
// writes to stdout is the answer, streamed to the client as it is written.
// It keeps a turn counter in its working directory, so a session (the
// x-edge-session header) visibly remembers its earlier turns.
import { readFile, writeFile } from 'node:fs/promises';

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const prompt = Buffer.concat(chunks).toString('utf8').trim();

const turn = Number(await readFile('turns.txt', 'utf8').catch(() => '0')) + 1;
await writeFile('turns.txt', String(turn));

const [model = 'demo-agent', session = 'default'] = process.argv.slice(2);
const reply = `[${model}, session ${session}, turn ${turn}] You said: ${prompt}`;
for (const word of reply.split(' ')) {
  process.stdout.write(`${word} `);
  await new Promise((resolve) => setTimeout(resolve, 40));
}
process.stdout.write('\n');
