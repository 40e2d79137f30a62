// The host's floor for relaying one token: the CPU one small loopback TCP
// write costs the Node process that makes it. Every relayed token of a slow
// stream is its own write on each hop (nothing to merge it with), so no
// process that writes one per token can spend less per token than this.
// On a VM the send syscall (which on loopback also runs the receiver's TCP
// input path) can cost several times what it does on bare metal; the report
// prints the floor beside the per-token goals so they are read against it.
//
// Measured in-process: a reader in a worker thread, the writer on the main
// thread, 100 connections written round-robin one chunk per turn (as many
// slow streams are), and only the writing thread's CPU counted.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import type { StreamsSetting } from './modes.js';

const CONNECTIONS = 100;
const ROUNDS = 60;
const CHUNK_BYTES = 120;

const READER = `
const net = require('node:net');
const { parentPort } = require('node:worker_threads');
const server = net.createServer((socket) => { socket.on('data', () => {}); socket.on('error', () => {}); });
server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
parentPort.on('message', () => server.close());
`;

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Median over 3 passes of the writer's CPU µs per write; undefined if the probe fails. */
export async function loopbackWriteFloorUs(): Promise<number | undefined> {
  const reader = new Worker(READER, { eval: true });
  const sockets: net.Socket[] = [];
  try {
    const port = await new Promise<number>((resolve, reject) => {
      reader.once('message', resolve);
      reader.once('error', reject);
    });
    for (let i = 0; i < CONNECTIONS; i++) {
      const socket = net.connect(port, '127.0.0.1');
      socket.setNoDelay(true);
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('error', reject);
      });
      sockets.push(socket);
    }
    const chunk = Buffer.alloc(CHUNK_BYTES, 0x61);
    const passes: number[] = [];
    for (let pass = 0; pass < 3; pass++) {
      const before = process.threadCpuUsage();
      for (let round = 0; round < ROUNDS; round++) {
        for (const socket of sockets) socket.write(chunk);
        await nextTurn();
      }
      const used = process.threadCpuUsage(before);
      passes.push((used.user + used.system) / (CONNECTIONS * ROUNDS));
    }
    passes.sort((a, b) => a - b);
    return passes[1];
  } catch {
    return undefined;
  } finally {
    for (const socket of sockets) socket.destroy();
    reader.postMessage('close');
    await reader.terminate();
  }
}

// The same floor at a slow-stream pattern: N connections, each written
// `tokensPerSecond` times a second, spread evenly over time, to a reader in
// another process. That is what the edge (a writer per token) and the agent
// (a reader per token) do at the per-token goal's pattern, and it costs more
// than the burst above: a write that wakes a sleeping process, and a read
// that needed a wake-up, pay for the wake-up.
const PACED_READER = `
const net = require('node:net');
const server = net.createServer((socket) => { socket.on('data', () => {}); socket.on('error', () => {}); });
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
// The bench gone (SIGTERM, a crash) without saying 'exit': the listening server would keep this process alive.
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  const cpu = process.cpuUsage();
  process.send({ cpuUs: cpu.user + cpu.system });
  if (m === 'exit') server.close(() => process.exit(0));
});
`;

/** One token's chunk of an OpenAI stream, about what the mock sends per token. */
const PACED_CHUNK = Buffer.from(`data: ${JSON.stringify({ id: 'chatcmpl-floor', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'tok ' } }] })}\n\n`);
const CONNECT_BATCH = 500;
const USAGE_TIMEOUT_MS = 5_000;

export interface PacedFloor extends StreamsSetting {
  /** CPU µs of the writing process per write (its pacing timer's own cost, measured idle, taken out). */
  readonly writeUs: number;
  /** CPU µs of the reading process per write it received. */
  readonly readUs: number;
}

interface ReaderUsage {
  readonly cpuUs: number;
}

/** Medians over `passes` passes of `passMs` (3 of 2 s by default); undefined if the probe fails. */
export async function pacedTokenFloor(setting: StreamsSetting, passes = 3, passMs = 2_000): Promise<PacedFloor | undefined> {
  const reader = spawn(process.execPath, ['-e', PACED_READER], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
  const replies: ((usage: ReaderUsage) => void)[] = [];
  const sockets: net.Socket[] = [];
  try {
    const port = await new Promise<number>((resolve, reject) => {
      reader.once('message', (m: { port: number }) => resolve(m.port));
      reader.once('error', reject);
      reader.once('exit', () => reject(new Error('the reader exited')));
    });
    reader.on('message', (m: ReaderUsage) => replies.shift()?.(m));
    // A reader that died or hangs must not hang the bench: no answer in 5 s fails the probe.
    const usage = (): Promise<ReaderUsage> => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the reader did not answer')), USAGE_TIMEOUT_MS);
      replies.push((answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      reader.send('usage');
    });
    while (sockets.length < setting.streams) {
      const batch: Promise<void>[] = [];
      for (let i = 0; i < CONNECT_BATCH && sockets.length < setting.streams; i++) {
        const socket = net.connect(port, '127.0.0.1');
        socket.setNoDelay(true);
        sockets.push(socket);
        batch.push(new Promise((resolve, reject) => {
          socket.once('connect', resolve);
          socket.once('error', reject);
        }));
      }
      await Promise.all(batch);
    }
    const writesPerMs = (setting.streams * setting.tokensPerSecond) / 1000;
    let next = 0;
    const writeOne = (): void => {
      sockets[next].write(PACED_CHUNK);
      if (++next === sockets.length) next = 0;
    };
    // The pacing timer's own cost, taken out below: at 1,000 writes/s it would be most of the figure.
    const idle = await pacedPass(writesPerMs, Math.min(passMs, 500), undefined);
    const tickUs = idle.cpuUs / idle.ticks;
    const writeUs: number[] = [];
    const readUs: number[] = [];
    for (let pass = 0; pass < passes; pass++) {
      const readerBefore = await usage();
      const { written, ticks, cpuUs } = await pacedPass(writesPerMs, passMs, writeOne);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the reader catches up
      const readerAfter = await usage();
      writeUs.push(Math.max(0, cpuUs - ticks * tickUs) / written);
      readUs.push((readerAfter.cpuUs - readerBefore.cpuUs) / written);
    }
    const median = (values: number[]): number => values.sort((a, b) => a - b)[values.length >> 1];
    return { ...setting, writeUs: median(writeUs), readUs: median(readUs) };
  } catch {
    return undefined;
  } finally {
    // RST, not FIN: 10,000 closes would leave as many ports in TIME_WAIT for the scenario that follows.
    for (const socket of sockets) socket.resetAndDestroy();
    if (reader.connected) reader.send('exit');
    else reader.kill();
  }
}

interface PassResult {
  readonly written: number;
  readonly ticks: number;
  readonly cpuUs: number;
}

/** One pass of `passMs`: a 1 ms timer makes the writes due so far (none when `write` is undefined); the thread's CPU. */
async function pacedPass(writesPerMs: number, passMs: number, write: (() => void) | undefined): Promise<PassResult> {
  const before = process.threadCpuUsage();
  const started = performance.now();
  const total = Math.floor(passMs * writesPerMs);
  let written = 0;
  let ticks = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      ticks++;
      const elapsed = performance.now() - started;
      const due = Math.min(Math.floor(elapsed * writesPerMs), total);
      if (write !== undefined) for (; written < due; written++) write();
      if (elapsed >= passMs) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  const used = process.threadCpuUsage(before);
  return { written, ticks, cpuUs: used.user + used.system };
}
