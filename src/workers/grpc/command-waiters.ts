// The commands one node session has sent and not yet seen answered: each
// waits for the CommandResult of its id, for its deadline (then `timeout`),
// or for the session to end (then `failed`), whichever comes first. Exactly
// one of the three settles it; a late answer is dropped.
import type { CommandResult, EdgeMessage } from '../../gen/edge/v1/tunnel_pb.js';
import { agentStatus, type NodeCommandResult } from '../../shared/node-commands.js';

interface Waiter {
  readonly kind: string;
  readonly timer: NodeJS.Timeout;
  readonly resolve: (result: NodeCommandResult) => void;
}

export class CommandWaiters {
  readonly #waiting = new Map<number, Waiter>();
  #nextId = 1;

  constructor(readonly nodeId: () => string) {}

  get size(): number {
    return this.#waiting.size;
  }

  /** Writes the command with `write` and resolves with its answer, a timeout, or the session's end. */
  send(kind: string, args: Readonly<Record<string, string>>, deadlineMs: number, write: (message: EdgeMessage) => void): Promise<NodeCommandResult> {
    const id = this.#nextId++;
    if (this.#nextId > 0xffff_ffff) this.#nextId = 1;
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#settle(id, { node: this.nodeId(), kind, status: 'timeout', message: `no answer within ${deadlineMs} ms` }), deadlineMs);
      this.#waiting.set(id, { kind, timer, resolve });
      try {
        write({ $typeName: 'edge.v1.EdgeMessage', msg: { case: 'command', value: { $typeName: 'edge.v1.Command', id, kind, args: { ...args }, deadlineMs } } });
      } catch (err) {
        this.#settle(id, { node: this.nodeId(), kind, status: 'failed', message: `could not send: ${(err as Error).message}` });
      }
    });
  }

  /** A CommandResult from the node; one with an id nobody waits for (late, or invented) is ignored. */
  answer(result: CommandResult): void {
    const waiter = this.#waiting.get(result.id);
    if (waiter === undefined) return;
    let details: unknown;
    if (result.resultJson !== '') {
      try {
        details = JSON.parse(result.resultJson);
      } catch {
        details = result.resultJson;
      }
    }
    const status = agentStatus(result.status);
    this.#settle(result.id, { node: this.nodeId(), kind: waiter.kind, status, message: result.message, ...(details === undefined ? {} : { result: details }) });
  }

  /** The session ended: every command still waiting fails. */
  failAll(reason: string): void {
    for (const id of [...this.#waiting.keys()]) {
      const waiter = this.#waiting.get(id);
      if (waiter !== undefined) this.#settle(id, { node: this.nodeId(), kind: waiter.kind, status: 'failed', message: `the node's connection ended before it answered: ${reason}` });
    }
  }

  #settle(id: number, result: NodeCommandResult): void {
    const waiter = this.#waiting.get(id);
    if (waiter === undefined) return;
    this.#waiting.delete(id);
    clearTimeout(waiter.timer);
    waiter.resolve(result);
  }
}
