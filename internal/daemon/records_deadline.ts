import { create, type DescMethodUnary, type DescService, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { DeadlinePassed, isUniqueViolation } from "../records/db";
import type { Records } from "../records/records";
import { DEADLINE_HEADER, IDEMPOTENCY_CONFLICT_HEADER, IDEMPOTENCY_KEY_HEADER } from "../wire/metadata";
import { tenantIn } from "./tenant";

// The record-bound RPCs (audience, automation, webhooks). A call with a deadline does its
// records work in one transaction, committed by the deadline or rolled back (Db.within), so the
// front that stops waiting then can say that nothing was written. A call with an
// Idempotency-Key keeps its answer in that same transaction, and a call with the same key and
// request gets that answer again; with another request, AlreadyExists.

const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

/** A unary RPC's implementation: its answer is a message or the fields of one. */
type UnaryImpl = (req: Message, ctx: HandlerContext) => Promise<Record<string, unknown>> | Record<string, unknown>;

/** The router as the record-bound services register on it: their unary RPCs run as said above. */
export function recordBoundRouter(router: ConnectRouter, records: Records, now: () => number): ConnectRouter {
  const bounded: ConnectRouter = {
    get handlers() {
      return router.handlers;
    },
    service(service, implementation, options) {
      const impl = implementation as unknown as Record<string, UnaryImpl>;
      const wrapped = Object.fromEntries(
        Object.entries(impl).map(([name, run]) => {
          const method = (service as DescService).method[name];
          if (method?.methodKind !== "unary") return [name, run];
          const unary = method as DescMethodUnary;
          return [name, (req: Message, ctx: HandlerContext) => recordBound(records, unary, req, ctx, run, now)];
        }),
      );
      router.service(service, wrapped as unknown as typeof implementation, options);
      return bounded;
    },
    rpc(method, impl, options) {
      router.rpc(method, impl, options);
      return bounded;
    },
  };
  return bounded;
}

async function recordBound(
  records: Records,
  method: DescMethodUnary,
  req: Message,
  ctx: HandlerContext,
  run: UnaryImpl,
  now: () => number,
): Promise<Record<string, unknown>> {
  const deadline = Number(ctx.requestHeader.get(DEADLINE_HEADER) ?? 0);
  if (!(deadline > 0)) return run(req, ctx);
  const key = ctx.requestHeader.get(IDEMPOTENCY_KEY_HEADER);
  const call = () =>
    records.db.within(deadline, async () => {
      if (key === null) return run(req, ctx);
      // An organization's keys are its own; the RPCs of no organization share "".
      const orgId = tenantIn(ctx.values) ?? "";
      const keyHash = sha256(key);
      const requestHash = sha256(`${method.parent.typeName}/${method.name}\n${sha256(toBinary(method.input, req))}`);
      const kept = await records.idempotency.find(orgId, keyHash, now());
      if (kept) {
        if (kept.requestHash !== requestHash)
          throw new ConnectError("this Idempotency-Key was used with a different request", Code.AlreadyExists, {
            [IDEMPOTENCY_CONFLICT_HEADER]: "1",
          });
        return fromBinary(method.output, Buffer.from(kept.response, "base64"));
      }
      const answer = create(method.output, await run(req, ctx));
      const response = Buffer.from(toBinary(method.output, answer)).toString("base64");
      await records.idempotency.keep(orgId, keyHash, { requestHash, response }, now());
      return answer;
    });
  try {
    try {
      return await call();
    } catch (err) {
      // Another call with this key committed first: this one answers as that one did.
      if (key !== null && isUniqueViolation(err)) return await call();
      throw err;
    }
  } catch (err) {
    if (err instanceof DeadlinePassed) throw new ConnectError(err.message, Code.DeadlineExceeded);
    throw err;
  }
}
