// A records timeout is told apart from every other failure of a call to the daemon: the API
// answers it RECORDS_TIMEOUT ("nothing was written") and the others LIMITER_UNAVAILABLE.
import { Code, ConnectError } from "@connectrpc/connect";
import { expect, test } from "bun:test";
import { RecordsTimedOut } from "./client";

test("only a RecordsTimedOut is one; it is still a ConnectError", () => {
  const timedOut = new RecordsTimedOut("deadline exceeded", Code.DeadlineExceeded);
  expect(timedOut instanceof RecordsTimedOut).toBe(true);
  expect(timedOut instanceof ConnectError).toBe(true);
  for (const code of [Code.Unavailable, Code.DeadlineExceeded, Code.Internal, Code.Unimplemented])
    expect(new ConnectError("failed", code) instanceof RecordsTimedOut).toBe(false);
  expect(new Error("failed") instanceof RecordsTimedOut).toBe(false);
});
