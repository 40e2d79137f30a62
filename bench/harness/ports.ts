// Free loopback ports, handed out once per run: the kernel picks one, we
// close it and pass the number to the process we start. Targets are started
// right after, so the window for another program to take the port is short.
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
