import { Code, ConnectError } from "@connectrpc/connect";
import type { GetSessionResponse } from "../gen/mailcore/limiter/v1/console_pb";
import { emailFilters } from "../api/activity";
import { apiContracts } from "../api/contract";
import { InvalidField } from "../api/invalid_field";
import { type EmailFilterForm, emailPage, emailsPage, webhookDeliveriesPage, webhooksPage } from "./activity_pages";
import type { ConsoleContext } from "./context";
import { type Notice, PATHS } from "./pages";
import { noticeOf, type PageRequest, page, pathParam, redirect } from "./request";
import { ownChange, reading, signedIn } from "./session";
import { ticketed } from "../api/respond";

// What happened to the organization's mail: the emails and their events, the webhook endpoints
// and their deliveries, with a test event and a replay.

const EMAILS_PER_PAGE = 25;
const WEBHOOKS_PER_PAGE = 10;
const DELIVERIES_PER_WEBHOOK = 10;

/** What a datetime input sends: a UTC time (the page says so) without a zone, to the minute or the second. */
const DATETIME_INPUT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/;

/** A datetime input's value as RFC 3339 (UTC); any other value as it is, for the API's check to refuse or take. */
export function rfc3339(value: string): string {
  if (!DATETIME_INPUT.test(value)) return value;
  return `${value}${value.length === 16 ? ":00" : ""}Z`;
}

/** The emails page's filters as the form sent them, datetimes in RFC 3339. */
export function emailFilterForm(q: URLSearchParams): EmailFilterForm {
  const value = (name: string) => (q.get(name) ?? "").trim();
  return {
    status: value("status"),
    lane: value("lane"),
    to: value("to"),
    tag: value("tag"),
    after: rfc3339(value("after")),
    before: rfc3339(value("before")),
  };
}

/** GET /console/emails: a page of the activity log; filters the API would refuse are the page saying why (422). */
export function showEmails(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  const q = r.url.searchParams;
  const form = emailFilterForm(q);
  let filters: ReturnType<typeof emailFilters>;
  try {
    // Checked as the API checks GET /api/v1/emails, so a refusal is said in the API's words.
    const asked = new URLSearchParams(Object.entries(form).filter(([, v]) => v !== ""));
    apiContracts().get("GET /api/v1/emails")!.parameters([], asked);
    filters = emailFilters(asked);
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    const text = `${err.message}.`;
    return signedIn(cx, r, async (s) =>
      page(
        422,
        emailsPage({ session: s, filters: form, messages: [], nextCursor: "", notice: { kind: "error", text } }),
      ),
    );
  }
  return reading(cx, r, async (s) => {
    const res = await cx.ports.mail.listMessages(
      { limit: EMAILS_PER_PAGE, cursor: q.get("cursor") ?? "", ...filters },
      ticketed(cx.call, s.ticket),
    );
    return emailsPage({ session: s, filters: form, messages: res.messages, nextCursor: res.nextCursor });
  });
}

/** GET /console/emails/{id}: one message with its events. */
export function showEmail(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return signedIn(cx, r, async (s) => {
    const { message } = await cx.ports.mail.getMessage({ messageId: pathParam(id!) }, ticketed(cx.call, s.ticket));
    return page(200, emailPage({ session: s, message: message! }));
  });
}

/** The webhooks page: a page of endpoints, each with its latest deliveries. */
async function webhooksView(cx: ConsoleContext, s: GetSessionResponse, r: PageRequest, n?: Notice): Promise<string> {
  const cursor = r.url.searchParams.get("cursor") ?? "";
  const list = await cx.ports.webhooks.listWebhooks({ limit: WEBHOOKS_PER_PAGE, cursor }, ticketed(cx.call, s.ticket));
  const endpoints = await Promise.all(
    list.endpoints.map(async (endpoint) => {
      const got = await cx.ports.webhooks.listWebhookDeliveries(
        { webhookId: endpoint.id, limit: DELIVERIES_PER_WEBHOOK },
        ticketed(cx.call, s.ticket),
      );
      return { endpoint, deliveries: got.deliveries, nextCursor: got.nextCursor };
    }),
  );
  return webhooksPage({ session: s, endpoints, nextCursor: list.nextCursor, notice: n ?? noticeOf(r.url) });
}

/** GET /console/webhooks. */
export function showWebhooks(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return reading(cx, r, (s) => webhooksView(cx, s, r));
}

/** GET /console/webhooks/{id}/deliveries: an endpoint's deliveries, paged. */
export function showWebhookDeliveries(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return reading(cx, r, async (s) => {
    const webhookId = pathParam(id!);
    const cursor = r.url.searchParams.get("cursor") ?? "";
    const got = await cx.ports.webhooks.listWebhookDeliveries(
      { webhookId, limit: DELIVERIES_PER_WEBHOOK, cursor },
      ticketed(cx.call, s.ticket),
    );
    return webhookDeliveriesPage({ session: s, webhookId, cursor, ...got });
  });
}

/** POST /console/webhooks/{id}/test: a webhook.test event on its way. */
export function testWebhook(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return ownChange(cx, r, async (s) => {
    await cx.ports.webhooks.testWebhook({ webhookId: pathParam(id!) }, ticketed(cx.call, s.ticket));
    return redirect(`${PATHS.webhooks}?done=tested`);
  });
}

/** POST /console/webhooks/{id}/deliveries/{deliveryId}/retry: a finished delivery pending again; one still pending is 409. */
export function retryWebhookDelivery(
  cx: ConsoleContext,
  r: PageRequest,
  [id, deliveryId]: string[],
): Promise<Response> {
  return ownChange(cx, r, async (s) => {
    try {
      await cx.ports.webhooks.retryWebhookDelivery(
        { webhookId: pathParam(id!), deliveryId: pathParam(deliveryId!) },
        ticketed(cx.call, s.ticket),
      );
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.FailedPrecondition)
        return page(409, await webhooksView(cx, s, r, { kind: "error", text: `${err.rawMessage}.` }));
      throw err;
    }
    return redirect(`${PATHS.webhooks}?done=replayed`);
  });
}
