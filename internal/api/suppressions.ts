import type { Suppression } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { type Handler, iso, json } from "./respond";
import { body, decoded, keyedCall, paging, route } from "./resource";
import { subscriberEmail } from "./subscribers";

// /api/v1/suppressions: the organization's suppression list, over the daemon. A send to a
// listed address is refused (422 RECIPIENT_SUPPRESSED); removing it lets sends through again.

function suppressionJson(s: Suppression) {
  return {
    email: s.email,
    reason: s.reason,
    detail: s.detail,
    messageId: s.messageId || null,
    createdAt: iso(s.createdAtMs),
  };
}

/** GET /api/v1/suppressions: a page, newest first, of one reason or all. */
export const listSuppressions = route(async ({ ports, records }, { req, headers }) => {
  const url = new URL(req.url);
  const page = paging(url);
  const res = await ports.suppressions.listSuppressions(
    { limit: page.limit, cursor: page.cursor, reason: url.searchParams.get("reason") ?? "" },
    records,
  );
  return json(200, { data: res.suppressions.map(suppressionJson), nextCursor: res.nextCursor || null }, headers);
});

/** POST /api/v1/suppressions: 201 when the address was listed now, 200 when it was already. */
export const addSuppression: Handler = route(async (front, a) => {
  const b = (await body(a)) as { email: unknown; detail?: string };
  const email = subscriberEmail("email", b.email);
  const res = await front.ports.suppressions.addSuppression({ email, detail: b.detail ?? "" }, keyedCall(front, a));
  return json(res.created ? 201 : 200, suppressionJson(res.suppression!), a.headers);
});

/** DELETE /api/v1/suppressions/{email}. */
export const deleteSuppression: Handler = route(async ({ ports, records }, { headers, params: [email] }) => {
  await ports.suppressions.deleteSuppression({ email: subscriberEmail("email", decoded(email!)) }, records);
  return new Response(null, { status: 204, headers });
});
