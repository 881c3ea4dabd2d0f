import {
  type WebhookDelivery,
  WebhookDeliveryState,
  type WebhookEndpoint,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import { Code, ConnectError } from "@connectrpc/connect";
import { checkEndpoint, MAX_WEBHOOKS_PER_ORG } from "../webhooks/endpoint";
import { InvalidField } from "./invalid_field";
import { error, type Handler, type Headers_, invalid, json, readJson } from "./respond";
import { paging, route } from "./resource";

// /api/v1/webhooks: an organization's endpoints and their deliveries, over the daemon.

const STATES: Record<number, string> = {
  [WebhookDeliveryState.PENDING]: "pending",
  [WebhookDeliveryState.DELIVERED]: "delivered",
  [WebhookDeliveryState.FAILED]: "failed",
};

const iso = (ms: bigint) => (ms === 0n ? null : new Date(Number(ms)).toISOString());

function endpointJson(e: WebhookEndpoint) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    createdAt: iso(e.createdAtMs),
    disabled: e.disabledAtMs !== 0n,
    disabledAt: iso(e.disabledAtMs),
    disabledReason: e.disabledReason || null,
    lastSuccessAt: iso(e.lastSuccessAtMs),
    lastFailureAt: iso(e.lastFailureAtMs),
    consecutiveFailures: e.consecutiveFailures,
  };
}

function deliveryJson(d: WebhookDelivery) {
  return {
    id: d.id,
    type: d.eventType,
    state: STATES[d.state],
    createdAt: iso(d.createdAtMs),
    nextAttemptAt: iso(d.nextAttemptAtMs),
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      at: iso(a.atMs),
      durationMs: a.durationMs,
      statusCode: a.statusCode || null,
      error: a.error || null,
      responseExcerpt: a.responseExcerpt,
    })),
  };
}

const noWebhook = (id: string, headers: Headers_) =>
  error(404, "NOT_FOUND", `No webhook ${id} in this organization.`, headers);

/** POST /api/v1/webhooks: an endpoint, with its signing secret this once. */
export const createWebhook: Handler = async ({ ports }, { req, admission, headers, checkBody }) => {
  const body = await readJson(req, headers);
  if (body instanceof Response) return body;
  try {
    checkBody(body);
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return invalid(err.field, err.message, headers);
  }
  const input = checkEndpoint(body);
  if ("field" in input) return invalid(input.field, input.message, headers);
  let made: Awaited<ReturnType<typeof ports.webhooks.create>>;
  try {
    made = await ports.webhooks.create(admission.ticket, input, req.headers.get("idempotency-key"));
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.ResourceExhausted)
      return error(
        409,
        "TOO_MANY_WEBHOOKS",
        `This organization has ${MAX_WEBHOOKS_PER_ORG} webhooks, the most it may have: delete one first.`,
        headers,
      );
    throw err;
  }
  return json(201, { ...endpointJson(made.endpoint!), secret: made.secret }, headers);
};

/** GET /api/v1/webhooks: a page of endpoints. */
export const listWebhooks = route(async ({ ports }, { req, admission, headers }) => {
  const page = paging(new URL(req.url));
  const res = await ports.webhooks.list(admission.ticket, page.limit, page.cursor);
  return json(200, { data: res.endpoints.map(endpointJson), nextCursor: res.nextCursor || null }, headers);
});

/** DELETE /api/v1/webhooks/{id}. */
export const deleteWebhook: Handler = async ({ ports }, { admission, headers, params: [id] }) => {
  if (!(await ports.webhooks.delete(admission.ticket, id!))) return noWebhook(id!, headers);
  return new Response(null, { status: 204, headers });
};

/** GET /api/v1/webhooks/{id}/deliveries: a page of an endpoint's deliveries, newest first. */
export const listWebhookDeliveries = route(async ({ ports }, { req, admission, headers, params: [id] }) => {
  const page = paging(new URL(req.url));
  const res = await ports.webhooks.deliveries(admission.ticket, id!, page.limit, page.cursor);
  if (!res) return noWebhook(id!, headers);
  return json(200, { data: res.deliveries.map(deliveryJson), nextCursor: res.nextCursor || null }, headers);
});

/** POST /api/v1/webhooks/{id}/test: a test event, delivered as any other. */
export const testWebhook: Handler = async ({ ports }, { req, admission, headers, params: [id] }) => {
  const res = await ports.webhooks.test(admission.ticket, id!, req.headers.get("idempotency-key"));
  if (!res) return noWebhook(id!, headers);
  return json(202, deliveryJson(res.delivery!), headers);
};

/** POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/retry: a finished delivery, tried again. */
export const retryWebhookDelivery: Handler = async ({ ports }, { admission, headers, params: [id, deliveryId] }) => {
  const res = await ports.webhooks.retry(admission.ticket, id!, deliveryId!);
  if (!res) return error(404, "NOT_FOUND", `No delivery ${deliveryId} of webhook ${id} in this organization.`, headers);
  if (res === "pending")
    return error(
      409,
      "DELIVERY_PENDING",
      `Delivery ${deliveryId} is still pending: its next attempt is already scheduled.`,
      headers,
    );
  return json(202, deliveryJson(res.delivery!), headers);
};
