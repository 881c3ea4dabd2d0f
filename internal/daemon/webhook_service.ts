import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type CreateWebhookRequest,
  type DeleteWebhookRequest,
  type ListWebhookDeliveriesRequest,
  type ListWebhooksRequest,
  type RetryWebhookDeliveryRequest,
  type TestWebhookRequest,
  WebhookDeliveryState,
  type WebhookEndpoint as EndpointMessage,
  WebhookEndpointSchema,
  type WebhookService,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Records } from "../records/records";
import { DeliveryState, type WebhookDelivery } from "../records/webhook_deliveries";
import type { WebhookEndpoint } from "../records/webhook_endpoints";
import { checkEndpoint, MAX_WEBHOOKS_PER_ORG } from "../webhooks/endpoint";
import { newWebhookSecret } from "../webhooks/signature";
import { guard, pageCursor } from "./rpc_errors";
import { tenantOf } from "./tenant";

// The webhook service (WebhookService): an organization's endpoints, and their deliveries with
// every attempt, for the API front.

const MAX_PAGE = 100;
const DEFAULT_PAGE = 20;

export interface WebhookDeps {
  records: Pick<Records, "webhookEndpoints" | "webhookDeliveries">;
  clock: Clock;
}

/** WebhookService's methods, by name. */
export function webhookHandlers(deps: WebhookDeps): ServiceImpl<typeof WebhookService> {
  return {
    createWebhook: (req, ctx) => createWebhook(deps, tenantOf(ctx.values), req),
    listWebhooks: (req, ctx) => listWebhooks(deps, tenantOf(ctx.values), req),
    deleteWebhook: (req, ctx) => deleteWebhook(deps, tenantOf(ctx.values), req),
    listWebhookDeliveries: (req, ctx) => listWebhookDeliveries(deps, tenantOf(ctx.values), req),
    testWebhook: (req, ctx) => testWebhook(deps, tenantOf(ctx.values), req),
    retryWebhookDelivery: (req, ctx) => retryWebhookDelivery(deps, tenantOf(ctx.values), req),
  };
}

/** A new endpoint, and its signing secret (returned this once). */
export async function createWebhook(deps: WebhookDeps, orgId: string, req: CreateWebhookRequest) {
  const input = checkEndpoint({ url: req.url, events: req.events });
  if ("field" in input) throw new ConnectError(`${input.field}: ${input.message}`, Code.InvalidArgument);
  const secret = newWebhookSecret();
  const endpoint = await guard(() =>
    deps.records.webhookEndpoints.create({
      orgId,
      ...input,
      secret,
      nowMs: deps.clock.nowMs(),
      max: MAX_WEBHOOKS_PER_ORG,
    }),
  );
  return { endpoint: endpointMessage(endpoint), secret };
}

export async function listWebhooks(deps: WebhookDeps, orgId: string, req: ListWebhooksRequest) {
  const page = await guard(() =>
    deps.records.webhookEndpoints.list(orgId, pageSize(req.limit), pageCursor(req.cursor)),
  );
  return { endpoints: page.data.map(endpointMessage), nextCursor: page.nextCursor ?? "" };
}

export async function deleteWebhook(deps: WebhookDeps, orgId: string, req: DeleteWebhookRequest) {
  if (!(await guard(() => deps.records.webhookEndpoints.delete(orgId, req.webhookId))))
    throw new ConnectError(`no webhook ${req.webhookId}`, Code.NotFound);
  return {};
}

export async function listWebhookDeliveries(deps: WebhookDeps, orgId: string, req: ListWebhookDeliveriesRequest) {
  const page = await guard(() =>
    deps.records.webhookDeliveries.list(orgId, req.webhookId, pageSize(req.limit), pageCursor(req.cursor)),
  );
  if (!page) throw new ConnectError(`no webhook ${req.webhookId}`, Code.NotFound);
  return { deliveries: page.data.map(deliveryMessage), nextCursor: page.nextCursor ?? "" };
}

export async function testWebhook(deps: WebhookDeps, orgId: string, req: TestWebhookRequest) {
  const made = await guard(() => deps.records.webhookDeliveries.test(orgId, req.webhookId, deps.clock.nowMs()));
  if (!made) throw new ConnectError(`no webhook ${req.webhookId}`, Code.NotFound);
  return { delivery: deliveryMessage(made) };
}

export async function retryWebhookDelivery(deps: WebhookDeps, orgId: string, req: RetryWebhookDeliveryRequest) {
  const retried = await guard(() =>
    deps.records.webhookDeliveries.retry(orgId, req.webhookId, req.deliveryId, deps.clock.nowMs()),
  );
  if (!retried) throw new ConnectError(`no delivery ${req.deliveryId} of webhook ${req.webhookId}`, Code.NotFound);
  if (retried === "pending")
    throw new ConnectError(
      `delivery ${req.deliveryId} is still pending: its next attempt is already due`,
      Code.FailedPrecondition,
    );
  return { delivery: deliveryMessage(retried) };
}

const STATES: Record<DeliveryState, WebhookDeliveryState> = {
  [DeliveryState.PENDING]: WebhookDeliveryState.PENDING,
  [DeliveryState.DELIVERED]: WebhookDeliveryState.DELIVERED,
  [DeliveryState.FAILED]: WebhookDeliveryState.FAILED,
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

/** A page's size: 20 when unset; InvalidArgument past 100. */
export function pageSize(limit: number): number {
  if (limit === 0) return DEFAULT_PAGE;
  if (limit > MAX_PAGE) throw new ConnectError(`limit must be 1 to ${MAX_PAGE}`, Code.InvalidArgument);
  return limit;
}
