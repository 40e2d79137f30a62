// Records of the worker <-> worker tunnel rings (variable length, little-endian):
//    0 u8  kind   PeerKind
//    1 u8  code   refused: 1 = stale, 2 = overloaded
//    2 u16 0
//    4 u32 tunnel the client worker's tunnel id (both directions use it)
//    8 ... per kind:
//   open     8 f64 leaseId, 16 u32 generation, 20 u16 node id bytes, 24 node id (UTF-8),
//            then the TunnelRequest (protobuf, as it goes to the node)
//   cancel   8 reason (UTF-8)
//   credit   8 u32 bytes
//   headers  8 TunnelFrame (protobuf: status, headers)
//   data     8 the body bytes as they came from the node
//   end      -
//   error    8 TunnelFrame (protobuf: error_code, error_message)
//   refused  8 u32 tunnels open on the node's session (overloaded)
//   openPart 8 a piece of an open record too large for one ring record (a
//            request body near limits.body_bytes): the whole open record,
//            header included, cut in order; code 1 marks the last piece
export const PeerKind = {
  open: 1,
  cancel: 2,
  credit: 3,
  headers: 4,
  data: 5,
  end: 6,
  error: 7,
  refused: 8,
  openPart: 9,
} as const;

/** openPart: this piece completes the open record. */
export const OPEN_PART_LAST = 1;

export const PEER_HEADER_BYTES = 8;
export const OPEN_FIXED_BYTES = 24;
export const REFUSED_STALE = 1;
export const REFUSED_OVERLOADED = 2;

export function putU32(target: Uint8Array, at: number, value: number): void {
  target[at] = value & 0xff;
  target[at + 1] = (value >>> 8) & 0xff;
  target[at + 2] = (value >>> 16) & 0xff;
  target[at + 3] = (value >>> 24) & 0xff;
}

export function getU32(source: Uint8Array, at: number): number {
  return (source[at] | (source[at + 1] << 8) | (source[at + 2] << 16) | (source[at + 3] << 24)) >>> 0;
}
