// A tiny provider for the agent's tests: node:http on loopback, with the
// handler under the test's control and every request recorded.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

export class UpstreamServer {
  readonly server: Server;
  readonly requests: SeenRequest[] = [];
  handler: UpstreamHandler;

  private constructor(handler: UpstreamHandler) {
    this.handler = handler;
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        this.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        this.handler(req, res, body);
      });
    });
  }

  static async start(handler: UpstreamHandler): Promise<UpstreamServer> {
    const upstream = new UpstreamServer(handler);
    await new Promise<void>((resolve) => upstream.server.listen(0, '127.0.0.1', resolve));
    return upstream;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A loopback port with nothing listening on it. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
