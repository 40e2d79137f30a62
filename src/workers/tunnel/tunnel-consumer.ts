// The shape every consumer of a tunnel's frames has (undici's dispatch
// handler idea): the HTTP relay, a test recorder or a metrics tap are
// interchangeable. Frames arrive already checked for order by the session;
// after onEnd or onError nothing more is delivered.
import type { Header } from '../../gen/edge/v1/tunnel_pb.js';

export interface TunnelConsumer {
  /** `upstreamUs`: the provider's time to this head as the node measured it, µs (0 = not measured). */
  onHeaders(status: number, headers: readonly Header[], upstreamUs: number): void;
  onData(bytes: Uint8Array): void;
  /** `upstreamUs`: the provider's time to its last byte as the node measured it, µs (0 = not measured). */
  onEnd(upstreamUs: number): void;
  onError(code: string, message: string): void;
}
