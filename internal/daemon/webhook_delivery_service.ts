import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type ClaimWebhookDeliveriesRequest,
  type ReportWebhookAttemptsRequest,
  WebhookAttemptResult,
  type WebhookDeliveryService,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Records } from "../records/records";
import type { ReportResult, RetryPolicy } from "../records/webhook_deliveries";
import { excerptOf } from "../webhooks/excerpt";
import { signWebhook } from "../webhooks/signature";
import { guard } from "./rpc_errors";

// The webhook delivery service (WebhookDeliveryService): the due deliveries the workers claim,
// signed, and the attempts they report.

/** A claim lasts the attempt's timeout and a margin; a worker that dies leaves the delivery due again then. */
const WEBHOOK_LEASE_MS = 30_000;
const MAX_CLAIM = 256;

const RESULTS: Record<ReportResult, WebhookAttemptResult> = {
  delivered: WebhookAttemptResult.DELIVERED,
  retrying: WebhookAttemptResult.RETRYING,
  failed: WebhookAttemptResult.FAILED,
  disabled: WebhookAttemptResult.DISABLED,
  stale: WebhookAttemptResult.STALE,
};

export interface WebhookDeliveryDeps {
  records: Pick<Records, "webhookDeliveries">;
  clock: Clock;
  /** When failed attempts are retried, and when an endpoint is disabled. */
  policy: RetryPolicy;
}

/** WebhookDeliveryService's methods, by name. */
export function webhookDeliveryHandlers(deps: WebhookDeliveryDeps): ServiceImpl<typeof WebhookDeliveryService> {
  return {
    claimWebhookDeliveries: (req) => claimWebhookDeliveries(deps, req),
    reportWebhookAttempts: (req) => reportWebhookAttempts(deps, req),
  };
}

/** Signed here, at the claim: the timestamp is the attempt's, and the secret stays in the daemon. */
export async function claimWebhookDeliveries(deps: WebhookDeliveryDeps, req: ClaimWebhookDeliveriesRequest) {
  const nowMs = deps.clock.nowMs();
  const limits = {
    perEndpoint: req.maxPerEndpoint,
    perOrg: req.maxPerOrg,
    inFlight: new Map(Object.entries(req.inFlight)),
  };
  const claimed = await guard(() =>
    deps.records.webhookDeliveries.claim(nowMs, Math.min(MAX_CLAIM, Math.max(1, req.max)), WEBHOOK_LEASE_MS, limits),
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
}

export async function reportWebhookAttempts(deps: WebhookDeliveryDeps, req: ReportWebhookAttemptsRequest) {
  const atMs = deps.clock.nowMs();
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
  const results = await guard(() => deps.records.webhookDeliveries.report(reports, deps.policy));
  return { results: results.map((r) => RESULTS[r]) };
}
