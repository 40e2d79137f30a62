// An operator command to one or more nodes (named by id or label): each
// node's command goes through the data path to the node's connection and
// every answer comes back, whatever it is (ok, failed, unsupported, timeout,
// not_connected). drain and undrain also switch the edge's own routing, so
// the scheduler stops granting the node new requests at the same moment the
// agent stops taking tunnels; the edge side holds even when the agent
// cannot answer (an agent that predates commands is still drained). An
// undrain lifts the edge's side only once the agent answered: a request
// granted before the agent heard would be refused (node_leaving), and that
// refusal drains the node on the edge again.
import type { DataPath } from '../../contract/data-path.js';
import type { EdgeConfig } from '../../shared/config-types.js';
import type { NodeCommandKind, NodeCommandResult } from '../../shared/node-commands.js';
import { resolveNodeRef } from './node-refs.js';

export interface NodeCommandHost {
  readonly config: EdgeConfig;
  readonly plane: Pick<DataPath, 'nodeCommand'>;
  /** The edge's own draining switch for a connected node; why not when it refused (not connected, retiring). */
  setEdgeDraining(nodeId: string, draining: boolean, checkOnly?: boolean): { readonly code: string; readonly message: string } | undefined;
  /** Per node, the latest drain or undrain command in flight (its number): an undrain answered after a later one began leaves the edge's side to it. */
  readonly drainCommands: Map<string, number>;
  /** As each node answers (not once all have): its agent now keeps a drain command's drain, or an undrain lifted it. */
  agentDrained(nodeId: string, drained: boolean): void;
}

export type NodeCommandOutcome =
  | { readonly ok: true; readonly ref: string; readonly kind: NodeCommandKind; readonly results: readonly NodeCommandResult[] }
  | { readonly ok: false; readonly code: 'node_not_found'; readonly message: string };

/** Numbers drain and undrain commands, never reused (an entry of drainCommands is the latest's). */
let drainCommandCount = 0;

export async function runNodeCommand(
  host: NodeCommandHost,
  ref: string,
  kind: NodeCommandKind,
  args: Readonly<Record<string, string>>,
  deadlineMs: number,
): Promise<NodeCommandOutcome> {
  const nodeIds = resolveNodeRef(host.config, ref);
  if (nodeIds.length === 0) return { ok: false, code: 'node_not_found', message: `no node has the id or label ${JSON.stringify(ref)}` };
  const results = await Promise.all(
    nodeIds.map(async (nodeId) => {
      if (kind === 'drain' || kind === 'undrain') {
        // The edge's switch first (an undrain's checks only): when it refuses, the agent is not told either (the two never disagree).
        const refused = host.setEdgeDraining(nodeId, kind === 'drain', kind === 'undrain');
        // No connection is what every other command reports as not_connected, not a failure of the node.
        if (refused?.code === 'node_not_connected') return { node: nodeId, kind, status: 'not_connected' as const, message: refused.message };
        if (refused !== undefined) return { node: nodeId, kind, status: 'failed' as const, message: `the edge did not ${kind} it: ${refused.code} (${refused.message})` };
        const seq = ++drainCommandCount;
        host.drainCommands.set(nodeId, seq);
        const result = await host.plane.nodeCommand(nodeId, kind, args, deadlineMs);
        const latest = host.drainCommands.get(nodeId) === seq;
        if (latest) host.drainCommands.delete(nodeId);
        // A drain sent meanwhile switched the edge already, and the agent takes it after this undrain: the edge stays drained.
        if (kind === 'undrain' && latest && (result.status === 'ok' || result.status === 'unsupported')) {
          // The agent takes tunnels now (or never refused them): only now may the scheduler send it the requests waiting.
          const late = host.setEdgeDraining(nodeId, false);
          if (late !== undefined) return { node: nodeId, kind, status: 'failed' as const, message: `the agent answered, but the edge did not undrain it: ${late.code} (${late.message})` };
          if (result.status === 'ok') host.agentDrained(nodeId, false);
        }
        // Recorded as this node answers, not once every node of the ref has: a later command's answer meanwhile is newer.
        if (kind === 'drain' && result.status === 'ok') host.agentDrained(nodeId, true);
        // An agent that cannot take it (one predating commands) still had the edge's switch flipped: say so, or the
        // operator reads "unsupported" as "nothing changed" while the node's routing did.
        if (result.status !== 'unsupported') return result;
        return { ...result, message: `${kind === 'drain' ? 'drained' : 'undrained'} on the edge only, for this connection (a reconnect ends it); ${result.message}` };
      }
      return host.plane.nodeCommand(nodeId, kind, args, deadlineMs);
    }),
  );
  return { ok: true, ref, kind, results };
}
