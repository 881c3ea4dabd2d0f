// gRPC's length-prefixed message ("envelope") for a unary call: one flag byte (bit 0:
// compressed), a 4-byte big-endian length, the message. Only uncompressed messages: the
// daemon and its fronts accept no compression (it cost more CPU than it saved).
import { WireError } from "./admit";

export const GRPC_HEADER_BYTES = 5;

/** The message in its envelope. */
export function envelope(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(GRPC_HEADER_BYTES + message.byteLength);
  out[0] = 0;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, GRPC_HEADER_BYTES);
  return out;
}

/** The one message of a unary call's body. */
export function unenvelope(body: Buffer): Buffer {
  if (body.length < GRPC_HEADER_BYTES)
    throw new WireError(`a unary message needs one envelope, got ${body.length} bytes`);
  if (body[0]! & 1) throw new WireError("a compressed message, and no compression was negotiated");
  const end = GRPC_HEADER_BYTES + body.readUInt32BE(1);
  if (end !== body.length)
    throw new WireError(`a unary message needs exactly one envelope: ${body.length} bytes, the envelope says ${end}`);
  return body.subarray(GRPC_HEADER_BYTES);
}
