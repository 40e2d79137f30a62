// Composes one edge process: the scheduler (main thread), the node gateway
// (gRPC listener), the data plane and the client listener.
import type { Logger } from 'pino';
import type { EdgeConfig } from '../shared/config-types.js';
import { createLogger } from '../shared/logger.js';
import { DataPlane } from '../workers/data-plane.js';
import { NodeGateway } from '../workers/grpc/node-gateway.js';
import { ClientServer } from '../workers/http/client-server.js';
import { SchedulerDriver } from './scheduler-driver.js';

export interface RunningEdge {
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly driver: SchedulerDriver;
  readonly nodes: NodeGateway;
  readonly plane: DataPlane;
  readonly url: string;
  /** Swaps the live config snapshot (capacities, models, queue policy). */
  setConfig(config: EdgeConfig): void;
  close(): Promise<void>;
}

export interface EdgeOptions {
  readonly logger?: Logger;
}

export async function startEdge(config: EdgeConfig, options: EdgeOptions = {}): Promise<RunningEdge> {
  const logger = options.logger ?? createLogger('edge');
  const driver = new SchedulerDriver(config);
  const nodes = new NodeGateway(config, driver, logger);
  const plane = new DataPlane(config, driver, nodes, logger);
  const client = new ClientServer(config, plane);
  const grpcPort = await nodes.listen(config.grpc.host, config.grpc.port);
  let httpPort: number;
  try {
    httpPort = await client.listen(config.http.host, config.http.port);
  } catch (err) {
    await nodes.close();
    throw err;
  }
  logger.info({ http: `${config.http.host}:${httpPort}`, grpc: `${config.grpc.host}:${grpcPort}` }, 'edge listening');
  return {
    httpPort,
    grpcPort,
    driver,
    nodes,
    plane,
    url: `http://${config.http.host}:${httpPort}`,
    setConfig(next: EdgeConfig): void {
      driver.setConfig(next);
      nodes.setConfig(next);
      plane.setConfig(next);
      client.setConfig(next);
    },
    async close(): Promise<void> {
      await client.close();
      await nodes.close();
      driver.close();
    },
  };
}
