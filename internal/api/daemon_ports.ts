import { Code, ConnectError } from "@connectrpc/connect";
import { MicroBatcher } from "../batch/batcher";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import type { Admission, AdmitCall, LimiterClients } from "../limiterclient/client";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { MAX_ADMIT_BATCH } from "../wire/admit";
import { DEADLINE_HEADER, NOT_QUEUED_HEADER, REQUEST_ID_HEADER, SEND_GRACE_MS } from "../wire/metadata";
import { type ApiPorts, type MailPort, NotQueued, type WebhookCalls } from "./ports";
import { createCall } from "./resource";

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
    send: (req, requestId) =>
      mail
        .send(req, {
          timeoutMs: timeoutMs + SEND_GRACE_MS,
          headers: { [DEADLINE_HEADER]: String(Date.now() + timeoutMs), [REQUEST_ID_HEADER]: requestId },
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
    getMessage: async (orgId, messageId) =>
      (await unlessNotFound(mail.getMessage({ orgId, messageId }, { timeoutMs })))?.message,
  };
}

/** The webhook calls over WebhookService, record-bound; what the daemon does not find is undefined. */
export function webhookPort(webhooks: ApiClients["webhooks"], recordsTimeoutMs: number): WebhookCalls {
  const recordsCall = { timeoutMs: recordsTimeoutMs };
  return {
    create: async (orgId, input, idempotencyKey) =>
      webhooks.createWebhook({ orgId, ...input }, createCall(recordsTimeoutMs, idempotencyKey)),
    list: async (orgId, limit, cursor) => webhooks.listWebhooks({ orgId, limit, cursor }, recordsCall),
    delete: async (orgId, webhookId) =>
      (await unlessNotFound(webhooks.deleteWebhook({ orgId, webhookId }, recordsCall))) !== undefined,
    deliveries: (orgId, webhookId, limit, cursor) =>
      unlessNotFound(webhooks.listWebhookDeliveries({ orgId, webhookId, limit, cursor }, recordsCall)),
    test: (orgId, webhookId, idempotencyKey) =>
      unlessNotFound(webhooks.testWebhook({ orgId, webhookId }, createCall(recordsTimeoutMs, idempotencyKey))),
    retry: async (orgId, webhookId, deliveryId) => {
      try {
        return await unlessNotFound(webhooks.retryWebhookDelivery({ orgId, webhookId, deliveryId }, recordsCall));
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
