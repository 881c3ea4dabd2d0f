import { Code, ConnectError } from "@connectrpc/connect";
import { MicroBatcher } from "../batch/batcher";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import type { Admission, AdmitCall, LimiterClients } from "../limiterclient/client";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { MAX_ADMIT_BATCH } from "../wire/admit";
import { DEADLINE_HEADER, NOT_QUEUED_HEADER, REQUEST_ID_HEADER, SEND_GRACE_MS, TICKET_HEADER } from "../wire/metadata";
import { type ApiPorts, type MailPort, NotQueued, type WebhookCalls } from "./ports";
import { createCall } from "./resource";
import { ticketed } from "./respond";

/** The daemon's clients the API's ports call. */
export type ApiClients = Pick<
  LimiterClients,
  "admitBatch" | "health" | "mail" | "webhooks" | "audience" | "automation"
>;

/** Sends and reads of one message over MailService; a send's failures are logged as one episode. */
export function mailPort(mail: ApiClients["mail"], timeoutMs: number, log: Logger): MailPort {
  const sendFailing = new FailureEpisode(log, "send");
  return {
    // The daemon refuses a send it reads after the deadline; the front waits a little longer
    // than that for the answer, so an answer that comes is the truth (deadline_process.test.ts).
    send: (ticket, req, requestId) =>
      mail
        .send(req, {
          timeoutMs: timeoutMs + SEND_GRACE_MS,
          headers: {
            [DEADLINE_HEADER]: String(Date.now() + timeoutMs),
            [REQUEST_ID_HEADER]: requestId,
            [TICKET_HEADER]: ticket,
          },
        })
        .then(
          (res) => {
            sendFailing.succeeded();
            return res;
          },
          (err: unknown) => {
            sendFailing.failed(err as Error);
            throw err instanceof ConnectError && err.metadata.get(NOT_QUEUED_HEADER) === "1"
              ? new NotQueued(err.message)
              : err;
          },
        ),
    getMessage: async (ticket, messageId) =>
      (await unlessNotFound(mail.getMessage({ messageId }, ticketed({ timeoutMs }, ticket))))?.message,
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
  );
  return {
    admission: { admit: (c) => admissions.submit(c) },
    health: {
      ready: async () =>
        (await clients.health.check({}, { timeoutMs: o.timeoutMs })).status ===
        HealthCheckResponse_ServingStatus.SERVING,
    },
    mail: mailPort(clients.mail, o.timeoutMs, o.log),
    activity: clients.mail,
    webhooks: webhookPort(clients.webhooks, o.recordsTimeoutMs),
    audience: clients.audience,
    automation: clients.automation,
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
