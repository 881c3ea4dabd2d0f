import { Code, ConnectError } from "@connectrpc/connect";
import { MicroBatcher } from "../batch/batcher";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import type { SendResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import { create } from "@bufbuild/protobuf";
import { type SendResult, SendResultSchema } from "../gen/mailcore/limiter/v1/send_batch_pb";
import type { Admission, AdmitCall, LimiterClients } from "../limiterclient/client";
import type { SendBatch } from "../limiterclient/send_batch";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { MAX_ADMIT_BATCH } from "../wire/admit";
import { SEND_GRACE_MS } from "../wire/metadata";
import { MAX_SEND_BATCH } from "../wire/send_batch";
import { type ApiPorts, type MailPort, NotQueued, type WebhookCalls } from "./ports";
import { createCall } from "./resource";
import { ticketed } from "./respond";

/**
 * AdmitBatch calls under way at once. One: every request that arrives meanwhile joins the next
 * call, which shares a call's costs (a stream, a Redis script call) among twice the requests of
 * two in flight, at the same requests a second (docs/adr/0009-admission-micro-batcher.md).
 */
const ADMISSIONS_IN_FLIGHT = 1;

/** SendBatch calls under way at once: one, as the admissions (ADMISSIONS_IN_FLIGHT). */
const SENDS_IN_FLIGHT = 1;

/** The daemon's clients the API's ports call. */
export type ApiClients = Pick<
  LimiterClients,
  "admitBatch" | "sendBatch" | "health" | "mail" | "webhooks" | "audience" | "automation" | "domains" | "suppressions"
>;

/** A send waiting for its batch: its ticket, the send (its email carries the request id) and its deadline. */
type BatchedSend = SendBatch["sends"][number] & { deadlineMs: number };

const NOT_SENT = create(SendResultSchema, {
  errorCode: Code.DeadlineExceeded,
  errorMessage: "the send waited past its deadline for the daemon; nothing was queued",
  notQueued: true,
});

/** A send's own answer in its batch's: the daemon's response, or its failure as the port reports it. */
function sendOutcome(r: SendResult): SendResponse {
  if (r.response) return r.response;
  throw r.notQueued ? new NotQueued(r.errorMessage) : new ConnectError(r.errorMessage, r.errorCode);
}

/**
 * Sends over SendBatch, coalesced like the admissions (MicroBatcher), and reads of one message
 * over MailService; a send's failures are logged as one episode.
 */
export function mailPort(clients: Pick<ApiClients, "mail" | "sendBatch">, timeoutMs: number, log: Logger): MailPort {
  const sendFailing = new FailureEpisode(log, "send");
  // The daemon refuses a batch it reads after its deadline (its first send's); the front waits a
  // little longer than that for the answer, so an answer that comes is the truth
  // (deadline_process.test.ts).
  const sends = new MicroBatcher<BatchedSend, SendResult>(
    async (batch) => {
      // A send whose deadline passed while it waited for a batch is not sent at all.
      const now = Date.now();
      const live = batch.filter((b) => b.deadlineMs > now);
      const deadlineMs = Math.min(...live.map((b) => b.deadlineMs));
      const answers = live.length
        ? await clients.sendBatch(
            { sends: live.map(({ deadlineMs: _, ...send }) => send), deadlineMs },
            deadlineMs + SEND_GRACE_MS - now,
          )
        : [];
      let next = 0;
      return batch.map((b) => (b.deadlineMs > now ? answers[next++]! : NOT_SENT));
    },
    MAX_SEND_BATCH,
    SENDS_IN_FLIGHT,
  );
  return {
    send: async (ticket, send, requestId) => {
      send.email.requestId = requestId;
      try {
        const res = sendOutcome(await sends.submit({ ticket, send, deadlineMs: Date.now() + timeoutMs }));
        sendFailing.succeeded();
        return res;
      } catch (err) {
        sendFailing.failed(err as Error);
        throw err;
      }
    },
    getMessage: async (ticket, messageId) =>
      (await unlessNotFound(clients.mail.getMessage({ messageId }, ticketed({ timeoutMs }, ticket))))?.message,
  };
}

/** The webhook calls over WebhookService, record-bound; what the daemon does not find is undefined. */
export function webhookPort(webhooks: ApiClients["webhooks"], recordsTimeoutMs: number): WebhookCalls {
  const recordsCall = (ticket: string) => ticketed({ timeoutMs: recordsTimeoutMs }, ticket);
  const keyed = (ticket: string, key: string | null) => createCall(recordsCall(ticket), key);
  return {
    create: async (ticket, input, idempotencyKey) => webhooks.createWebhook(input, keyed(ticket, idempotencyKey)),
    list: async (ticket, limit, cursor) => webhooks.listWebhooks({ limit, cursor }, recordsCall(ticket)),
    delete: async (ticket, webhookId) =>
      (await unlessNotFound(webhooks.deleteWebhook({ webhookId }, recordsCall(ticket)))) !== undefined,
    deliveries: (ticket, webhookId, limit, cursor) =>
      unlessNotFound(webhooks.listWebhookDeliveries({ webhookId, limit, cursor }, recordsCall(ticket))),
    test: (ticket, webhookId, idempotencyKey) =>
      unlessNotFound(webhooks.testWebhook({ webhookId }, keyed(ticket, idempotencyKey))),
    retry: async (ticket, webhookId, deliveryId) => {
      try {
        return await unlessNotFound(webhooks.retryWebhookDelivery({ webhookId, deliveryId }, recordsCall(ticket)));
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.FailedPrecondition) return "pending";
        throw err;
      }
    },
  };
}

/** The API's ports over the daemon's clients, each call with a deadline; admissions are micro-batched. */
export function daemonPorts(
  clients: ApiClients,
  o: {
    timeoutMs: number;
    /** The deadline of a record-bound call. */
    recordsTimeoutMs: number;
    log: Logger;
  },
): Omit<ApiPorts, "validation"> {
  const admissions = new MicroBatcher<AdmitCall, Admission>(
    (calls) => clients.admitBatch(calls, o.timeoutMs),
    MAX_ADMIT_BATCH,
    ADMISSIONS_IN_FLIGHT,
  );
  return {
    admission: { admit: (c) => admissions.submit(c) },
    health: {
      ready: async () =>
        (await clients.health.check({}, { timeoutMs: o.timeoutMs })).status ===
        HealthCheckResponse_ServingStatus.SERVING,
    },
    mail: mailPort(clients, o.timeoutMs, o.log),
    activity: clients.mail,
    webhooks: webhookPort(clients.webhooks, o.recordsTimeoutMs),
    audience: clients.audience,
    automation: clients.automation,
    domains: clients.domains,
    suppressions: clients.suppressions,
  };
}

/** The call's answer, or undefined when the daemon answers NOT_FOUND. */
async function unlessNotFound<T>(answer: Promise<T>): Promise<T | undefined> {
  try {
    return await answer;
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
    throw err;
  }
}
