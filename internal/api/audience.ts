import {
  type Subscriber,
  SubscriberStatus,
  UpsertOutcome,
  type UpsertResult,
} from "../gen/mailcore/limiter/v1/audience_pb";
import { type Admitted, type Front, type Handler, type Headers_, iso, json } from "./respond";
import { body, decoded, keyedCall, paging, route } from "./resource";
import {
  type ChangeInit,
  parseBatch,
  parsePatch,
  parseTagCreate,
  parseTagsBody,
  parseUpsert,
  subscriberStatus,
  tagName,
} from "./subscribers";

// The audience endpoints: subscribers, their tags and events, and the organization's tags
// (GET /api/v1/tags is answered from the admission). Each validates here and makes one call to
// the daemon.

/** A subscriber's status as the API names it (the console shows the same words). */
export const SUBSCRIBER_STATUS_NAMES: Record<number, string> = {
  [SubscriberStatus.SUBSCRIBED]: "subscribed",
  [SubscriberStatus.UNSUBSCRIBED]: "unsubscribed",
};
const OUTCOME_NAMES: Record<number, string> = {
  [UpsertOutcome.CREATED]: "created",
  [UpsertOutcome.UPDATED]: "updated",
  [UpsertOutcome.UNCHANGED]: "unchanged",
};

function subscriberJson(s: Subscriber) {
  return {
    id: s.id,
    email: s.email,
    name: s.name,
    status: SUBSCRIBER_STATUS_NAMES[s.status],
    fields: JSON.parse(s.fieldsJson),
    tags: s.tags,
    createdAt: iso(s.createdAtMs),
    updatedAt: iso(s.updatedAtMs),
  };
}

/** A changed subscriber: 201 when it was created, otherwise 200. */
function resultJson(r: UpsertResult | undefined, headers: Headers_): Response {
  return json(r!.outcome === UpsertOutcome.CREATED ? 201 : 200, subscriberJson(r!.subscriber!), headers);
}

/** A partial update of the path's subscriber: 200 and the subscriber. */
async function updated({ ports, records }: Front, a: Admitted, change: ChangeInit, removeTags: string[] = []) {
  const { result } = await ports.audience.updateSubscriber({ ref: decoded(a.params[0]!), change, removeTags }, records);
  return json(200, subscriberJson(result!.subscriber!), a.headers);
}

/** GET /api/v1/subscribers: a page, filtered by tag, status and email prefix. */
export const listSubscribers = route(async ({ ports, records }, { req, headers }) => {
  const url = new URL(req.url);
  const status = url.searchParams.get("status");
  const tag = url.searchParams.get("tag");
  const res = await ports.audience.listSubscribers(
    {
      ...paging(url),
      tag: tag === null ? "" : tagName("tag", tag),
      status: status === null ? SubscriberStatus.UNSPECIFIED : subscriberStatus("status", status),
      emailPrefix: url.searchParams.get("email") ?? "",
    },
    records,
  );
  return json(200, { data: res.subscribers.map(subscriberJson), nextCursor: res.nextCursor || null }, headers);
});

/** POST /api/v1/subscribers: creates or updates one subscriber by email. */
export const upsertSubscriber = route(async (front, a) => {
  const change = parseUpsert(await body(a));
  const { results } = await front.ports.audience.upsertSubscribers({ subscribers: [change] }, keyedCall(front, a));
  return resultJson(results[0], a.headers);
});

/** POST /api/v1/subscribers/batch: each item created, updated or refused on its own. */
export const upsertSubscribers = route(async (front, a) => {
  const items = parseBatch(await body(a));
  const valid = items.flatMap((item) => (item.ok ? [item.change] : []));
  const { results } =
    valid.length > 0
      ? await front.ports.audience.upsertSubscribers({ subscribers: valid, brief: true }, keyedCall(front, a))
      : { results: [] as UpsertResult[] };
  let next = 0;
  const data = items.map((item) => {
    if (!item.ok)
      return {
        email: item.email,
        result: "error",
        id: null,
        error: item.error.message,
        field: item.error.field,
      };
    const r = results[next++]!;
    return { email: r.subscriber!.email, result: OUTCOME_NAMES[r.outcome], id: r.subscriber!.id, error: null };
  });
  return json(200, { data }, a.headers);
});

/** GET /api/v1/subscribers/{id}: by id or email. */
export const getSubscriber = route(async ({ ports, records }, { headers, params }) => {
  const { subscriber } = await ports.audience.getSubscriber({ ref: decoded(params[0]!) }, records);
  return json(200, subscriberJson(subscriber!), headers);
});

/** PATCH /api/v1/subscribers/{id}: what is given changes. */
export const updateSubscriber = route(async (front, a) => updated(front, a, parsePatch(await body(a))));

/** DELETE /api/v1/subscribers/{id}. */
export const deleteSubscriber = route(async ({ ports, records }, { headers, params }) => {
  await ports.audience.deleteSubscriber({ ref: decoded(params[0]!) }, records);
  return new Response(null, { status: 204, headers });
});

/** POST /api/v1/subscribers/{id}/tags: adds tags. */
export const tagSubscriber = route(async (front, a) => {
  const { tags, triggerWorkflows } = parseTagsBody(await body(a));
  return updated(front, a, { tags, triggerWorkflows });
});

/** DELETE /api/v1/subscribers/{id}/tags: removes tags. */
export const untagSubscriber = route(async (front, a) => {
  const { tags, triggerWorkflows } = parseTagsBody(await body(a));
  return updated(front, a, { triggerWorkflows }, tags);
});

/** GET /api/v1/subscribers/{id}/events: a page of the subscriber's history. */
export const listSubscriberEvents = route(async ({ ports, records }, { req, headers, params }) => {
  const res = await ports.audience.listSubscriberEvents(
    { ref: decoded(params[0]!), ...paging(new URL(req.url)) },
    records,
  );
  const data = res.events.map((e) => ({
    type: e.type,
    at: iso(e.atMs),
    data: JSON.parse(e.dataJson),
    triggerWorkflows: e.triggerWorkflows,
  }));
  return json(200, { data, nextCursor: res.nextCursor || null }, headers);
});

/** GET /api/v1/tags: the organization's tags, answered from its admission (asked withTags). */
export const listTags: Handler = async (_front, { admission, headers }) =>
  json(200, { data: admission.tags.map((t) => ({ name: t.name, subscribers: t.subscribers })) }, headers);

/** POST /api/v1/tags: 201 when created, 200 when the organization had it. */
export const createTag = route(async (front, a) => {
  const name = parseTagCreate(await body(a));
  const { created } = await front.ports.audience.createTag({ name }, keyedCall(front, a));
  return json(created ? 201 : 200, { name }, a.headers);
});

/** DELETE /api/v1/tags/{name}: the tag, off every subscriber. */
export const deleteTag = route(async ({ ports, records }, { headers, params }) => {
  await ports.audience.deleteTag({ name: decoded(params[0]!) }, records);
  return new Response(null, { status: 204, headers });
});
