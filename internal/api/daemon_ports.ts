import { Code, ConnectError } from "@connectrpc/connect";
import { MicroBatcher } from "../batch/batcher";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import type { Admission, AdmitCall, LimiterClients } from "../limiterclient/client";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { MAX_ADMIT_BATCH } from "../wire/admit";
import { DEADLINE_HEADER, NOT_QUEUED_HEADER, REQUEST_ID_HEADER, SEND_GRACE_MS } from "../wire/metadata";
import { type ApiPorts, NotQueued } from "./ports";
import { createCall } from "./resource";

/** The daemon's clients the API's ports call. */
export type ApiClients = Pick<
  LimiterClients,
  "admitBatch" | "health" | "mail" | "webhooks" | "audience" | "automation"
>;

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
  const { health, mail, webhooks } = clients;
  const call = { timeoutMs: o.timeoutMs };
  const recordsCall = { timeoutMs: o.recordsTimeoutMs };
  const admissions = new MicroBatcher<AdmitCall, Admission>(
    (calls) => clients.admitBatch(calls, o.timeoutMs),
    MAX_ADMIT_BATCH,
  );
  const sendFailing = new FailureEpisode(o.log, "send");
  return {
    admission: { admit: (c) => admissions.submit(c) },
    health: {
      ready: async () => (await health.check({}, call)).status === HealthCheckResponse_ServingStatus.SERVING,
    },
    mail: {
      // The daemon refuses a send it reads after the deadline; the front waits a little longer
      // than that for the answer, so an answer that comes is the truth (deadline_process.test.ts).
      send: (req, requestId) =>
        mail
          .send(req, {
            timeoutMs: o.timeoutMs + SEND_GRACE_MS,
            headers: { [DEADLINE_HEADER]: String(Date.now() + o.timeoutMs), [REQUEST_ID_HEADER]: requestId },
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
        (await unlessNotFound(mail.getMessage({ orgId, messageId }, call)))?.message,
    },
    activity: mail,
    webhooks: {
      create: async (orgId, input, idempotencyKey) =>
        webhooks.createWebhook({ orgId, ...input }, createCall(o.recordsTimeoutMs, idempotencyKey)),
      list: async (orgId, limit, cursor) => webhooks.listWebhooks({ orgId, limit, cursor }, recordsCall),
      delete: async (orgId, webhookId) =>
        (await unlessNotFound(webhooks.deleteWebhook({ orgId, webhookId }, recordsCall))) !== undefined,
      deliveries: (orgId, webhookId, limit, cursor) =>
        unlessNotFound(webhooks.listWebhookDeliveries({ orgId, webhookId, limit, cursor }, recordsCall)),
      test: (orgId, webhookId, idempotencyKey) =>
        unlessNotFound(webhooks.testWebhook({ orgId, webhookId }, createCall(o.recordsTimeoutMs, idempotencyKey))),
      retry: async (orgId, webhookId, deliveryId) => {
        try {
          return await unlessNotFound(webhooks.retryWebhookDelivery({ orgId, webhookId, deliveryId }, recordsCall));
        } catch (err) {
          if (err instanceof ConnectError && err.code === Code.FailedPrecondition) return "pending";
          throw err;
        }
      },
    },
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
