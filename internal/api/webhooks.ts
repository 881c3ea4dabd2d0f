import {
  type CreateWebhookResponse,
  type ListWebhookDeliveriesResponse,
  type ListWebhooksResponse,
  type WebhookDelivery,
  WebhookDeliveryState,
  type WebhookEndpoint,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import { checkEndpoint, type EndpointInput } from "../webhooks/endpoint";
import { error, type Headers_, json, readJson, type Route } from "./respond";

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
}

const WEBHOOK_ID = /^wh_[0-9a-f]{24}$/;
const CURSOR = /^[A-Za-z0-9_-]{1,200}$/;
const DEFAULT_LIMIT = 20;

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
    })),
  };
}

/** ?limit (1-100) and ?cursor, or a 422 naming the bad one. */
function pageParams(req: Request, headers: Headers_): { limit: number; cursor: string } | Response {
  const q = new URL(req.url).searchParams;
  const limit = q.get("limit") ?? String(DEFAULT_LIMIT);
  const cursor = q.get("cursor") ?? "";
  if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > 100)
    return invalid("limit", "limit must be a whole number from 1 to 100.", headers);
  if (cursor !== "" && !CURSOR.test(cursor))
    return invalid("cursor", "cursor must be the nextCursor of a previous page.", headers);
  return { limit: Number(limit), cursor };
}

function invalid(field: string, message: string, headers: Headers_): Response {
  return json(422, { code: "VALIDATION_FAILED", message, field }, headers);
}

const noWebhook = (id: string, headers: Headers_) =>
  error(404, "NOT_FOUND", `No webhook ${id} in this organization.`, headers);

export function webhookRoutes(calls: WebhookCalls): [string, Route][] {
  return [
    [
      "/api/v1/webhooks",
      {
        POST: async ({ req, admission, headers }) => {
          const body = await readJson(req, headers);
          if (body instanceof Response) return body;
          const input = checkEndpoint(body);
          if ("field" in input) return invalid(input.field, input.message, headers);
          const made = await calls.create(admission.orgId, input, req.headers.get("idempotency-key"));
          return json(201, { ...endpointJson(made.endpoint!), secret: made.secret }, headers);
        },
        GET: async ({ req, admission, headers }) => {
          const page = pageParams(req, headers);
          if (page instanceof Response) return page;
          const res = await calls.list(admission.orgId, page.limit, page.cursor);
          return json(200, { data: res.endpoints.map(endpointJson), nextCursor: res.nextCursor || null }, headers);
        },
      },
    ],
    [
      "/api/v1/webhooks/{id}",
      {
        DELETE: async ({ admission, headers, params: [id] }) => {
          if (!WEBHOOK_ID.test(id!) || !(await calls.delete(admission.orgId, id!))) return noWebhook(id!, headers);
          return new Response(null, { status: 204, headers });
        },
      },
    ],
    [
      "/api/v1/webhooks/{id}/deliveries",
      {
        GET: async ({ req, admission, headers, params: [id] }) => {
          const page = pageParams(req, headers);
          if (page instanceof Response) return page;
          const res = WEBHOOK_ID.test(id!)
            ? await calls.deliveries(admission.orgId, id!, page.limit, page.cursor)
            : undefined;
          if (!res) return noWebhook(id!, headers);
          return json(200, { data: res.deliveries.map(deliveryJson), nextCursor: res.nextCursor || null }, headers);
        },
      },
    ],
  ];
}
