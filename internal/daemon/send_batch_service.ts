import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import { SendOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import {
  type SendBatchRequest,
  SendBatchRequestSchema,
  SendBatchResponseSchema,
  type SendResultSchema,
  type TicketedSend,
} from "../gen/mailcore/limiter/v1/send_batch_pb";
import { type DiskSpace, isDiskFull } from "../diskspace/diskspace";
import type { Logger } from "../log/log";
import { laneName } from "../mail/policy";
import { MAX_SEND_BATCH, SEND_BATCH_PATH } from "../wire/send_batch";
import { type MailDeps, send } from "./mail_service";
import type { RawUnary } from "./server";
import type { Tickets } from "./tickets";

// The API's sends, coalesced (SendBatchService): each send of a batch through the accept step
// as MailService.Send takes it, for the organization of its own admission ticket, all of them
// at once, each answered on its own. Served as a raw method in binary gRPC only (the front's hot
// path), so what the interceptors do around a Send is done here: the ticket (tenantGate's check,
// per send), the caller's deadline, the line about each queued message, a full disk noted.

export interface SendBatchDeps extends Pick<MailDeps, "accept" | "refusals"> {
  tickets: Pick<Tickets, "check">;
  clock: Clock;
  log: Logger;
  /** Told of a send refused because the store's disk is full. */
  disk?: Pick<DiskSpace, "noted">;
}

type SendResultInit = MessageInitShape<typeof SendResultSchema>;

/** The methods served outside Connect's router: SendBatch in binary gRPC. */
export function sendBatchRawHandlers(deps: SendBatchDeps): Record<string, RawUnary> {
  return { [SEND_BATCH_PATH]: (request) => sendRawBatch(deps, request) };
}

/** SendBatch from its bytes. */
export async function sendRawBatch(deps: SendBatchDeps, request: Buffer): Promise<Uint8Array> {
  let req: SendBatchRequest;
  try {
    req = fromBinary(SendBatchRequestSchema, request);
  } catch (err) {
    throw new ConnectError(`not a SendBatchRequest: ${(err as Error).message}`, Code.InvalidArgument);
  }
  const results = await sendBatch(deps, req);
  return toBinary(SendBatchResponseSchema, create(SendBatchResponseSchema, { results }));
}

/**
 * Every send of the batch, at once. A batch read after its deadline queues none of them (each
 * answered not queued): the front has stopped waiting, and must not see a send queued behind
 * its back.
 */
export async function sendBatch(deps: SendBatchDeps, req: SendBatchRequest): Promise<SendResultInit[]> {
  if (req.sends.length > MAX_SEND_BATCH)
    throw new ConnectError(`a batch holds at most ${MAX_SEND_BATCH} sends`, Code.InvalidArgument);
  if (req.deadlineMs > 0n && deps.clock.nowMs() >= Number(req.deadlineMs)) {
    const late = {
      errorCode: Code.DeadlineExceeded,
      errorMessage: "the caller's deadline passed before limiterd read the send; nothing was queued",
      notQueued: true,
    };
    return req.sends.map(() => late);
  }
  return Promise.all(req.sends.map((s) => sendOne(deps, s)));
}

/** One send of a batch, for its ticket's organization: the daemon's response, or its failure as a status. */
async function sendOne(deps: SendBatchDeps, { ticket, send: req }: TicketedSend): Promise<SendResultInit> {
  const checked = deps.tickets.check(ticket);
  if ("refused" in checked) {
    deps.log.warn("refused a send: no valid admission ticket", { rpc: SEND_BATCH_PATH, ticket: checked.refused });
    return {
      errorCode: Code.Unauthenticated,
      errorMessage: `a send acts for the organization of a valid admission ticket only (${checked.refused})`,
      notQueued: true,
    };
  }
  if (!req) return { errorCode: Code.InvalidArgument, errorMessage: "a send without its request", notQueued: true };
  try {
    const response = await send(deps, checked.orgId, req);
    if (response.outcome === SendOutcome.ACCEPTED)
      deps.log.info("queued", {
        requestId: req.email?.requestId ?? "",
        message: response.messageId,
        org: checked.orgId,
        lane: laneName(req.lane),
      });
    return { response };
  } catch (err) {
    if (isDiskFull(err)) deps.disk?.noted("store", err);
    const e = ConnectError.from(err);
    return { errorCode: e.code, errorMessage: e.rawMessage, notQueued: false };
  }
}
