import {
  type CreateWebhookResponse,
  type ListWebhookDeliveriesResponse,
  type ListWebhooksResponse,
  type RetryWebhookDeliveryResponse,
  type TestWebhookResponse,
  type WebhookDelivery,
  WebhookDeliveryState,
  type WebhookEndpoint,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import { checkEndpoint, type EndpointInput } from "../webhooks/endpoint";
import { InvalidField } from "./emails";
import { error, type Headers_, invalid, json, readJson, type Route } from "./respond";
import { paging, route } from "./routing";

// /api/v1/webhooks: an organization's endpoints and their deliveries, over the daemon.

/** What the webhook routes need from the daemon; not found is undefined (or false), not an error. */
export interface WebhookCalls {
  /** idempotencyKey: the client's Idempotency-Key, null without one. */
  create(orgId: string, input: EndpointInput, idempotencyKey: string | null): Promise<CreateWebhookResponse>;
  list(orgId: string, limit: number, cursor: string): Promise<ListWebhooksResponse>;
  delete(orgId: string, id: string): Promise<boolean>;
  deliveries(
    orgId: string,
    id: string,
    limit: number,
    cursor: string,
  ): Promise<ListWebhookDeliveriesResponse | undefined>;
  /** undefined when the organization has no such webhook; idempotencyKey as for create. */
  test(orgId: string, id: string, idempotencyKey: string | null): Promise<TestWebhookResponse | undefined>;
  /** undefined when the organization has no such webhook or delivery; "pending" when it is not finished. */
  retry(orgId: string, id: string, deliveryId: string): Promise<RetryWebhookDeliveryResponse | "pending" | undefined>;
}

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

export function webhookRoutes(calls: WebhookCalls): [string, Route][] {
  return [
    [
      "/api/v1/webhooks",
      {
        POST: async ({ req, admission, headers, checkBody }) => {
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
          const made = await calls.create(admission.orgId, input, req.headers.get("idempotency-key"));
          return json(201, { ...endpointJson(made.endpoint!), secret: made.secret }, headers);
        },
        GET: route(async ({ req, admission, headers }) => {
          const page = paging(new URL(req.url));
          const res = await calls.list(admission.orgId, page.limit, page.cursor);
          return json(200, { data: res.endpoints.map(endpointJson), nextCursor: res.nextCursor || null }, headers);
        }),
      },
    ],
    [
      "/api/v1/webhooks/{id}",
      {
        DELETE: async ({ admission, headers, params: [id] }) => {
          if (!(await calls.delete(admission.orgId, id!))) return noWebhook(id!, headers);
          return new Response(null, { status: 204, headers });
        },
      },
    ],
    [
      "/api/v1/webhooks/{id}/deliveries",
      {
        GET: route(async ({ req, admission, headers, params: [id] }) => {
          const page = paging(new URL(req.url));
          const res = await calls.deliveries(admission.orgId, id!, page.limit, page.cursor);
          if (!res) return noWebhook(id!, headers);
          return json(200, { data: res.deliveries.map(deliveryJson), nextCursor: res.nextCursor || null }, headers);
        }),
      },
    ],
    [
      "/api/v1/webhooks/{id}/test",
      {
        POST: async ({ req, admission, headers, params: [id] }) => {
          const res = await calls.test(admission.orgId, id!, req.headers.get("idempotency-key"));
          if (!res) return noWebhook(id!, headers);
          return json(202, deliveryJson(res.delivery!), headers);
        },
      },
    ],
    [
      "/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry",
      {
        POST: async ({ admission, headers, params: [id, deliveryId] }) => {
          const res = await calls.retry(admission.orgId, id!, deliveryId!);
          if (!res)
            return error(404, "NOT_FOUND", `No delivery ${deliveryId} of webhook ${id} in this organization.`, headers);
          if (res === "pending")
            return error(
              409,
              "DELIVERY_PENDING",
              `Delivery ${deliveryId} is still pending: its next attempt is already scheduled.`,
              headers,
            );
          return json(202, deliveryJson(res.delivery!), headers);
        },
      },
    ],
  ];
}
