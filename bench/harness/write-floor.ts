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
import net from 'node:net';
import { Worker } from 'node:worker_threads';

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
