import { create } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  WebhookAttemptResult,
  WebhookDeliveryService,
  WebhookDeliveryState,
  type WebhookEndpoint as EndpointMessage,
  WebhookEndpointSchema,
  WebhookService,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Records } from "../records/records";
import {
  DeliveryState,
  type ReportResult,
  type RetryPolicy,
  type WebhookDelivery,
  type WebhookEndpoint,
} from "../records/webhooks";
import { checkEndpoint } from "../webhooks/endpoint";
import { excerptOf } from "../webhooks/excerpt";
import { newWebhookSecret, signWebhook } from "../webhooks/signature";
import { guard, pageCursor } from "./service";

/** A claim lasts the attempt's timeout and a margin; a worker that dies leaves the delivery due again then. */
const WEBHOOK_LEASE_MS = 30_000;
const MAX_CLAIM = 256;
const MAX_PAGE = 100;
const DEFAULT_PAGE = 20;

export interface WebhookDeps {
  records: Records;
  clock: Clock;
  policy: RetryPolicy;
}

const STATES: Record<DeliveryState, WebhookDeliveryState> = {
  [DeliveryState.PENDING]: WebhookDeliveryState.PENDING,
  [DeliveryState.DELIVERED]: WebhookDeliveryState.DELIVERED,
  [DeliveryState.FAILED]: WebhookDeliveryState.FAILED,
};

const RESULTS: Record<ReportResult, WebhookAttemptResult> = {
  delivered: WebhookAttemptResult.DELIVERED,
  retrying: WebhookAttemptResult.RETRYING,
  failed: WebhookAttemptResult.FAILED,
  disabled: WebhookAttemptResult.DISABLED,
  stale: WebhookAttemptResult.STALE,
};

function endpointMessage(e: WebhookEndpoint): EndpointMessage {
  return create(WebhookEndpointSchema, {
    id: e.id,
    url: e.url,
    events: e.events,
    createdAtMs: BigInt(e.createdMs),
    disabledAtMs: BigInt(e.disabledMs ?? 0),
    disabledReason: e.disabledReason ?? "",
    lastSuccessAtMs: BigInt(e.lastSuccessMs ?? 0),
    lastFailureAtMs: BigInt(e.lastFailureMs ?? 0),
    consecutiveFailures: e.consecutiveFailures,
  });
}

function deliveryMessage(d: WebhookDelivery) {
  return {
    id: d.id,
    eventType: d.eventType,
    state: STATES[d.state],
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      atMs: BigInt(a.atMs),
      durationMs: a.durationMs,
      statusCode: a.statusCode ?? 0,
      error: a.error,
      responseExcerpt: a.responseExcerpt,
    })),
    nextAttemptAtMs: BigInt(d.nextAttemptMs ?? 0),
    createdAtMs: BigInt(d.createdMs),
  };
}

function pageSize(limit: number): number {
  if (limit === 0) return DEFAULT_PAGE;
  if (limit > MAX_PAGE) throw new ConnectError(`limit must be 1 to ${MAX_PAGE}`, Code.InvalidArgument);
  return limit;
}

/** The daemon's webhook RPCs: endpoints for the API front, the due queue for the workers. */
export function webhookRoutes(deps: WebhookDeps) {
  const { records, clock } = deps;
  return (router: ConnectRouter) => {
    router.service(WebhookService, {
      async createWebhook(req) {
        const input = checkEndpoint({ url: req.url, events: req.events });
        if ("field" in input) throw new ConnectError(`${input.field}: ${input.message}`, Code.InvalidArgument);
        const secret = newWebhookSecret();
        const endpoint = await guard(() =>
          records.webhooks.create({ orgId: req.orgId, ...input, secret, nowMs: clock.nowMs() }),
        );
        return { endpoint: endpointMessage(endpoint), secret };
      },

      async listWebhooks(req) {
        const page = await guard(() => records.webhooks.list(req.orgId, pageSize(req.limit), pageCursor(req.cursor)));
        return { endpoints: page.data.map(endpointMessage), nextCursor: page.nextCursor ?? "" };
      },

      async deleteWebhook(req) {
        if (!(await guard(() => records.webhooks.delete(req.orgId, req.webhookId))))
          throw new ConnectError(`no webhook ${req.webhookId}`, Code.NotFound);
        return {};
      },

      async listWebhookDeliveries(req) {
        const page = await guard(() =>
          records.webhooks.deliveries(req.orgId, req.webhookId, pageSize(req.limit), pageCursor(req.cursor)),
        );
        if (!page) throw new ConnectError(`no webhook ${req.webhookId}`, Code.NotFound);
        return { deliveries: page.data.map(deliveryMessage), nextCursor: page.nextCursor ?? "" };
      },

      async testWebhook(req) {
        const made = await guard(() => records.webhooks.test(req.orgId, req.webhookId, clock.nowMs()));
        if (!made) throw new ConnectError(`no webhook ${req.webhookId}`, Code.NotFound);
        return { delivery: deliveryMessage(made) };
      },

      async retryWebhookDelivery(req) {
        const retried = await guard(() =>
          records.webhooks.retry(req.orgId, req.webhookId, req.deliveryId, clock.nowMs()),
        );
        if (!retried)
          throw new ConnectError(`no delivery ${req.deliveryId} of webhook ${req.webhookId}`, Code.NotFound);
        if (retried === "pending")
          throw new ConnectError(
            `delivery ${req.deliveryId} is still pending: its next attempt is already due`,
            Code.FailedPrecondition,
          );
        return { delivery: deliveryMessage(retried) };
      },
    });

    router.service(WebhookDeliveryService, {
      // Signed here, at the claim: the timestamp is the attempt's, and the secret stays in the daemon.
      async claimWebhookDeliveries(req) {
        const nowMs = clock.nowMs();
        const limits = { perEndpoint: req.maxPerEndpoint, inFlight: new Map(Object.entries(req.inFlight)) };
        const claimed = await guard(() =>
          records.webhooks.claim(nowMs, Math.min(MAX_CLAIM, Math.max(1, req.max)), WEBHOOK_LEASE_MS, limits),
        );
        const timestamp = Math.floor(nowMs / 1_000);
        return {
          tasks: claimed.map((d) => ({
            deliveryId: d.id,
            endpointId: d.endpointId,
            leaseToken: d.leaseToken,
            url: d.url,
            webhookId: d.id,
            webhookTimestamp: BigInt(timestamp),
            webhookSignature: signWebhook(d.secret, d.id, timestamp, d.payload),
            body: d.payload,
            attempt: d.attempt,
          })),
        };
      },

      async reportWebhookAttempts(req) {
        const atMs = clock.nowMs();
        const reports = req.reports.map((r) => ({
          deliveryId: r.deliveryId,
          leaseToken: r.leaseToken,
          atMs,
          durationMs: r.durationMs,
          statusCode: r.statusCode === 0 ? null : r.statusCode,
          error: r.error,
          // Cleaned again: the records keep 256 characters at most whatever a worker sends.
          responseExcerpt: excerptOf(r.responseExcerpt),
        }));
        const results = await guard(() => records.webhooks.report(reports, deps.policy));
        return { results: results.map((r) => RESULTS[r]) };
      },
    });
  };
}
