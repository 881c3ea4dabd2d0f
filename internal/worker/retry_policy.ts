import { Code, ConnectError } from "@connectrpc/connect";

// Which failures of the worker's calls to the daemon are worth trying again: the daemon, or its
// store, being unavailable is; a call the daemon refuses for what it is never succeeds.

const PERMANENT = new Set([
  Code.InvalidArgument,
  Code.NotFound,
  Code.FailedPrecondition,
  Code.PermissionDenied,
  Code.Unimplemented,
]);

/** Whether err is the daemon refusing the call for what it is (not for being unavailable): not retried. */
export function isPermanent(err: unknown): err is ConnectError {
  return err instanceof ConnectError && PERMANENT.has(err.code);
}
