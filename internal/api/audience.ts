import type { Client } from "@connectrpc/connect";
import {
  type AudienceService,
  type Subscriber,
  SubscriberStatus,
  UpsertOutcome,
  type UpsertResult,
} from "../gen/mailcore/limiter/v1/audience_pb";
import { type Admitted, type Headers_, iso, json, type Route } from "./respond";
import { body, decoded, keyedCall, paging, route } from "./routing";
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
// (GET /api/v1/tags is answered from the admission, in server.ts). Each validates here and
// makes one call to the daemon.

/** The daemon's audience RPCs. */
export type AudienceCalls = Client<typeof AudienceService>;

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

/** The audience routes, by path template, for the API's route table. */
export function audienceRoutes(audience: AudienceCalls, timeoutMs: number): [string, Route][] {
  const call = { timeoutMs };
  /** A partial update of the path's subscriber: 200 and the subscriber. */
  const update = async (a: Admitted, change: ChangeInit, removeTags: string[] = []) => {
    const { result } = await audience.updateSubscriber(
      { orgId: a.admission.orgId, ref: decoded(a.params[0]!), change, removeTags },
      call,
    );
    return json(200, subscriberJson(result!.subscriber!), a.headers);
  };
  return [
    [
      "/api/v1/subscribers",
      {
        GET: route(async ({ req, admission, headers }) => {
          const url = new URL(req.url);
          const status = url.searchParams.get("status");
          const tag = url.searchParams.get("tag");
          const res = await audience.listSubscribers(
            {
              orgId: admission.orgId,
              ...paging(url),
              tag: tag === null ? "" : tagName("tag", tag),
              status: status === null ? SubscriberStatus.UNSPECIFIED : subscriberStatus("status", status),
              emailPrefix: url.searchParams.get("email") ?? "",
            },
            call,
          );
          return json(200, { data: res.subscribers.map(subscriberJson), nextCursor: res.nextCursor || null }, headers);
        }),
        POST: route(async (a) => {
          const change = parseUpsert(await body(a));
          const { results } = await audience.upsertSubscribers(
            { orgId: a.admission.orgId, subscribers: [change] },
            keyedCall(a, timeoutMs),
          );
          return resultJson(results[0], a.headers);
        }),
      },
    ],
    [
      "/api/v1/subscribers/batch",
      {
        POST: route(async (a) => {
          const items = parseBatch(await body(a));
          const valid = items.flatMap((item) => (item.ok ? [item.change] : []));
          const { results } =
            valid.length > 0
              ? await audience.upsertSubscribers(
                  { orgId: a.admission.orgId, subscribers: valid, brief: true },
                  keyedCall(a, timeoutMs),
                )
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
        }),
      },
    ],
    [
      "/api/v1/subscribers/{id}",
      {
        GET: route(async ({ admission, headers, params }) => {
          const { subscriber } = await audience.getSubscriber(
            { orgId: admission.orgId, ref: decoded(params[0]!) },
            call,
          );
          return json(200, subscriberJson(subscriber!), headers);
        }),
        PATCH: route(async (a) => {
          return update(a, parsePatch(await body(a)));
        }),
        DELETE: route(async ({ admission, headers, params }) => {
          await audience.deleteSubscriber({ orgId: admission.orgId, ref: decoded(params[0]!) }, call);
          return new Response(null, { status: 204, headers });
        }),
      },
    ],
    [
      "/api/v1/subscribers/{id}/tags",
      {
        POST: route(async (a) => {
          const { tags, triggerWorkflows } = parseTagsBody(await body(a));
          return update(a, { tags, triggerWorkflows });
        }),
        DELETE: route(async (a) => {
          const { tags, triggerWorkflows } = parseTagsBody(await body(a));
          return update(a, { triggerWorkflows }, tags);
        }),
      },
    ],
    [
      "/api/v1/subscribers/{id}/events",
      {
        GET: route(async ({ req, admission, headers, params }) => {
          const res = await audience.listSubscriberEvents(
            { orgId: admission.orgId, ref: decoded(params[0]!), ...paging(new URL(req.url)) },
            call,
          );
          const data = res.events.map((e) => ({
            type: e.type,
            at: iso(e.atMs),
            data: JSON.parse(e.dataJson),
            triggerWorkflows: e.triggerWorkflows,
          }));
          return json(200, { data, nextCursor: res.nextCursor || null }, headers);
        }),
      },
    ],
    [
      "/api/v1/tags/{name}",
      {
        DELETE: route(async ({ admission, headers, params }) => {
          await audience.deleteTag({ orgId: admission.orgId, name: decoded(params[0]!) }, call);
          return new Response(null, { status: 204, headers });
        }),
      },
    ],
  ];
}

/** POST /api/v1/tags: 201 when created, 200 when the organization had it. */
export function createTagHandler(audience: AudienceCalls, timeoutMs: number): (a: Admitted) => Promise<Response> {
  return route(async (a) => {
    const name = parseTagCreate(await body(a));
    const { created } = await audience.createTag({ orgId: a.admission.orgId, name }, keyedCall(a, timeoutMs));
    return json(created ? 201 : 200, { name }, a.headers);
  });
}
