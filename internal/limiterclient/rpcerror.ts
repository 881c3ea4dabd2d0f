// How a call to limiterd fails, apart from the caller (unary.ts), so that code that only tells
// failures apart loads no HTTP/2.

/** The status codes of Connect and gRPC, as the Connect protocol spells them on the wire. */
export type RpcCode =
  | "canceled"
  | "unknown"
  | "invalid_argument"
  | "deadline_exceeded"
  | "not_found"
  | "already_exists"
  | "permission_denied"
  | "resource_exhausted"
  | "failed_precondition"
  | "aborted"
  | "out_of_range"
  | "unimplemented"
  | "internal"
  | "unavailable"
  | "data_loss"
  | "unauthenticated";

const CODES: ReadonlySet<unknown> = new Set<RpcCode>([
  "canceled",
  "unknown",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "permission_denied",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "out_of_range",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
  "unauthenticated",
]);

/** A call that failed: refused by the daemon with its code and message, or "unavailable" when it could not be reached. */
export class RpcError extends Error {
  constructor(
    readonly code: RpcCode,
    message: string,
  ) {
    super(message);
  }
}

export function isRpcCode(code: unknown): code is RpcCode {
  return CODES.has(code);
}
