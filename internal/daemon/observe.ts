import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { SendRequest, SendResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import { SendOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import { DEADLINE_HEADER, NOT_QUEUED_HEADER, REQUEST_ID_HEADER } from "../wire/metadata";
import { type DiskSpace, isDiskFull } from "../diskspace/diskspace";
import type { Logger } from "../log/log";
import { laneName } from "../mail/policy";
import { tenantOf } from "./tenant";

/**
 * What the daemon does around its RPCs, whatever the store: a Send read after its caller's
 * deadline is refused before it touches the store; the request id rides into the message (so
 * the worker logs it) and into the daemon's line about it (after tenantGate, whose organization it names); a call refused because the store's
 * disk is full (UNAVAILABLE, which the caller retries or answers 503) is noted on `disk`.
 * (Admissions are counted where they are decided, in the limiter service: AdmitBatch also
 * arrives outside the router.)
 */
export function daemonInterceptors(o: { log: Logger; disk?: DiskSpace; now?: () => number }): Interceptor[] {
  const now = o.now ?? Date.now;
  const diskFull: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (isDiskFull(err)) o.disk?.noted("store", err);
      throw err;
    }
  };
  const observe: Interceptor = (next) => async (req) => {
    if (req.stream) return next(req);
    const method = req.method.name;
    if (method === "Send") {
      const deadline = Number(req.header.get(DEADLINE_HEADER) ?? 0);
      if (deadline > 0 && now() >= deadline) {
        throw new ConnectError(
          "the caller's deadline passed before limiterd read the send; nothing was queued",
          Code.DeadlineExceeded,
          { [NOT_QUEUED_HEADER]: "1" },
        );
      }
      const requestId = req.header.get(REQUEST_ID_HEADER) ?? "";
      const send = req.message as SendRequest;
      if (send.email) send.email.requestId = requestId;
      const res = await next(req);
      const answer = res.message as SendResponse;
      if (answer.outcome === SendOutcome.ACCEPTED)
        o.log.info("queued", {
          requestId,
          message: answer.messageId,
          org: tenantOf(req.contextValues),
          lane: laneName(send.lane),
        });
      return res;
    }
    return next(req);
  };
  return [diskFull, observe];
}
