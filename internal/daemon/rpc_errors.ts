import { Code, ConnectError } from "@connectrpc/connect";
import { RecordError, type RecordErrorKind } from "../records/db";
import { isCursor } from "../records/paging";

// What every service of the daemon does with a store call that fails and with a list's cursor.

const RECORD_ERROR_CODES: Record<RecordErrorKind, Code> = {
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  too_many: Code.ResourceExhausted,
};

/** Maps store failures to RPC codes: a store (hot or records) that cannot be reached is UNAVAILABLE. */
export async function guard<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    if (err instanceof RecordError) throw new ConnectError(err.message, RECORD_ERROR_CODES[err.kind]);
    throw new ConnectError(`store unavailable: ${(err as Error).message}`, Code.Unavailable, undefined, undefined, err);
  }
}

/** A list's cursor for the records: undefined for the first page; InvalidArgument when no page handed it out. */
export function pageCursor(cursor: string): string | undefined {
  if (cursor === "") return undefined;
  if (!isCursor(cursor)) throw new ConnectError("not a cursor of this list", Code.InvalidArgument);
  return cursor;
}
