import { Code, ConnectError } from "@connectrpc/connect";
import { IDEMPOTENCY_KEY_HEADER } from "../wire/metadata";
import { InvalidField } from "./invalid_field";
import { type Admitted, type CallOptions, error, type Front, type Handler, invalid, readJson } from "./respond";

// What the resource endpoints (audience, campaigns, workflows, webhooks, the activity log)
// share around their one call to the daemon: path segments, paging, the body, and the answers
// for what the daemon refuses.

export const DEFAULT_LIMIT = 20;

/** A path segment: an id, or an email or tag name as it is or percent-encoded. */
export function decoded(param: string): string {
  try {
    return decodeURIComponent(param);
  } catch {
    throw new ConnectError(`nothing is named ${param} in this organization`, Code.NotFound);
  }
}

/** ?limit= (default 20) and ?cursor=, as the document's contract admitted them. */
export function paging(url: URL): { limit: number; cursor: string } {
  const raw = url.searchParams.get("limit");
  return { limit: raw === null ? DEFAULT_LIMIT : Number(raw), cursor: url.searchParams.get("cursor") ?? "" };
}

/** A create's call options: o's, with the client's Idempotency-Key when it sent one. */
export function createCall(o: CallOptions, idempotencyKey: string | null): CallOptions {
  return idempotencyKey === null ? o : { ...o, headers: { ...o.headers, [IDEMPOTENCY_KEY_HEADER]: idempotencyKey } };
}

/** The record-bound create call of an admitted request (see createCall). */
export const keyedCall = (front: Front, a: Admitted) => createCall(front.records, a.req.headers.get("idempotency-key"));

/** A body refused before it was parsed (415, 413, 400). */
class Refused extends Error {
  constructor(readonly response: Response) {
    super("refused");
  }
}

/** The body as JSON, as the document admits it; Refused when it cannot be read, InvalidField when it is refused. */
export async function body(a: Admitted): Promise<unknown> {
  const b = await readJson(a.req, a.headers);
  if (b instanceof Response) throw new Refused(b);
  a.checkBody(b);
  return b;
}

/**
 * A handler with the answers every resource endpoint shares: a body that cannot be read as
 * readJson says, an invalid field 422, a subscriber or tag the daemon does not find (another
 * organization's too) 404, a cursor it does not know 422. Other failures go to the caller (503).
 */
export function route(run: Handler): Handler {
  return async (front, a) => {
    try {
      return await run(front, a);
    } catch (err) {
      if (err instanceof Refused) return err.response;
      if (err instanceof InvalidField) return invalid(err.field, err.message, a.headers);
      if (err instanceof ConnectError && err.code === Code.NotFound)
        return error(404, "NOT_FOUND", `${err.rawMessage}.`, a.headers);
      if (err instanceof ConnectError && err.code === Code.InvalidArgument && /cursor/.test(err.rawMessage))
        return invalid("cursor", `cursor: ${err.rawMessage}`, a.headers);
      throw err;
    }
  };
}
