// Free loopback ports, handed out once per run: the kernel picks one, we
// close it and pass the number to the process we start. Targets are started
// right after, so the window for another program to take the port is short.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const handedOut = new Set<number>();

export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, host, () => {
        const address = server.address();
        const port = typeof address === 'object' && address !== null ? address.port : 0;
        server.close(() => resolve(port));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/**
 * Waits until the loopback has room for `needed` new client connections.
 * Every run of many streams leaves its connections in TIME_WAIT for 60 s
 * (loadgen -> target and agent -> mock alike, all on this one machine), and
 * two 10,000-stream runs back to back exhaust the ephemeral port range: the
 * next connects fail (seen as a few dozen 502s from whichever target ran
 * third). Linux only; elsewhere it returns at once. Resolves with the ms waited.
 */
export async function waitForEphemeralPorts(needed: number, maxWaitMs = 90_000): Promise<number> {
  const range = ephemeralRange();
  if (range === undefined) return 0;
  const started = performance.now();
  for (;;) {
    const timeWait = timeWaitSockets() ?? 0;
    const waited = performance.now() - started;
    if (range - timeWait >= needed || waited >= maxWaitMs) return Math.round(waited);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

function ephemeralRange(): number | undefined {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return high >= low ? high - low + 1 : undefined;
  } catch {
    return undefined;
  }
}

function timeWaitSockets(): number | undefined {
  try {
    const match = /TCP:.*\btw (\d+)/.exec(readFileSync('/proc/net/sockstat', 'utf8'));
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}
