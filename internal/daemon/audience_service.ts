import { create } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  AudienceService,
  type Subscriber as SubscriberMsg,
  type SubscriberChange as ChangeMsg,
  SubscriberSchema,
  SubscriberStatus,
  UpsertOutcome,
  type UpsertResult as UpsertResultMsg,
  UpsertResultSchema,
} from "../gen/mailcore/limiter/v1/audience_pb";
import type { UpsertResult } from "../records/audience";
import type { Fields, Subscriber, SubscriberChange, SubscriberStatus as Status } from "../records/audience_types";
import type { Records } from "../records/records";
import { guard, pageCursor } from "./service";

// The audience RPCs over the records. The API front has validated every request; here the
// messages become record changes and back.

export interface AudienceDeps {
  records: Records;
  clock: Clock;
  /** A subscriber changed: workflow runs may have started. */
  onChange?: () => void;
}

const STATUS_OF: Record<number, Status | undefined> = {
  [SubscriberStatus.SUBSCRIBED]: "subscribed",
  [SubscriberStatus.UNSUBSCRIBED]: "unsubscribed",
};
const STATUS_MSG: Record<Status, SubscriberStatus> = {
  subscribed: SubscriberStatus.SUBSCRIBED,
  unsubscribed: SubscriberStatus.UNSUBSCRIBED,
};
const OUTCOME_MSG = {
  created: UpsertOutcome.CREATED,
  updated: UpsertOutcome.UPDATED,
  unchanged: UpsertOutcome.UNCHANGED,
} as const;
const MAX_LIMIT = 100;

function toChange(m: ChangeMsg | undefined, removeTags: string[] = []): SubscriberChange {
  if (!m) throw new ConnectError("change is required", Code.InvalidArgument);
  let fields: Fields | undefined;
  if (m.fieldsJson !== "") {
    try {
      fields = JSON.parse(m.fieldsJson) as Fields;
    } catch {
      throw new ConnectError("fields_json is not JSON", Code.InvalidArgument);
    }
  }
  return {
    name: m.name,
    fields,
    // Without replace_tags, no tags and leaving the tags as they are are the same.
    tags: m.replaceTags || m.tags.length > 0 ? m.tags : undefined,
    removeTags,
    status: STATUS_OF[m.status],
    replaceTags: m.replaceTags,
    resubscribe: m.resubscribe,
    triggerWorkflows: m.triggerWorkflows,
  };
}

function toSubscriberMsg(s: Subscriber): SubscriberMsg {
  return create(SubscriberSchema, {
    id: s.id,
    email: s.email,
    name: s.name,
    status: STATUS_MSG[s.status],
    fieldsJson: JSON.stringify(s.fields),
    tags: s.tags,
    createdAtMs: BigInt(s.createdMs),
    updatedAtMs: BigInt(s.updatedMs),
  });
}

function toResultMsg(r: UpsertResult): UpsertResultMsg {
  return create(UpsertResultSchema, { outcome: OUTCOME_MSG[r.result], subscriber: toSubscriberMsg(r.subscriber) });
}

function briefResultMsg(r: UpsertResult): UpsertResultMsg {
  return create(UpsertResultSchema, {
    outcome: OUTCOME_MSG[r.result],
    subscriber: { id: r.subscriber.id, email: r.subscriber.email },
  });
}

function page(limit: number, cursor: string): { limit: number; cursor: string | undefined } {
  if (limit < 1 || limit > MAX_LIMIT) throw new ConnectError(`limit must be 1 to ${MAX_LIMIT}`, Code.InvalidArgument);
  return { limit, cursor: pageCursor(cursor) };
}

function notFound(ref: string): ConnectError {
  return new ConnectError(`no subscriber ${ref}`, Code.NotFound);
}

export function audienceRoutes({ records, clock, onChange = () => {} }: AudienceDeps) {
  const { audience } = records;
  return (router: ConnectRouter) =>
    router.service(AudienceService, {
      async upsertSubscribers(req) {
        const inputs = req.subscribers.map((m) => ({ ...toChange(m), email: m.email }));
        const results = await guard(() => audience.upsertMany(req.orgId, inputs, clock.nowMs()));
        onChange();
        return { results: results.map((r) => (req.brief ? briefResultMsg(r) : toResultMsg(r))) };
      },
      async updateSubscriber(req) {
        const result = await guard(() =>
          audience.update(req.orgId, req.ref, toChange(req.change, req.removeTags), clock.nowMs()),
        );
        if (!result) throw notFound(req.ref);
        onChange();
        return { result: toResultMsg(result) };
      },
      async getSubscriber(req) {
        const s = await guard(() => audience.get(req.orgId, req.ref));
        if (!s) throw notFound(req.ref);
        return { subscriber: toSubscriberMsg(s) };
      },
      async deleteSubscriber(req) {
        if (!(await guard(() => audience.delete(req.orgId, req.ref, clock.nowMs())))) throw notFound(req.ref);
        return {};
      },
      async listSubscribers(req) {
        const p = page(req.limit, req.cursor);
        const filter = {
          tag: req.tag || undefined,
          status: STATUS_OF[req.status],
          emailPrefix: req.emailPrefix || undefined,
        };
        const found = await guard(() => audience.list(req.orgId, filter, p.limit, p.cursor));
        return { subscribers: found.data.map(toSubscriberMsg), nextCursor: found.nextCursor ?? "" };
      },
      async listSubscriberEvents(req) {
        const p = page(req.limit, req.cursor);
        const found = await guard(() => audience.events(req.orgId, req.ref, p.limit, p.cursor));
        if (!found) throw notFound(req.ref);
        return {
          events: found.data.map((e) => ({
            type: e.type,
            atMs: BigInt(e.atMs),
            dataJson: JSON.stringify(e.data),
            triggerWorkflows: e.triggerWorkflows,
          })),
          nextCursor: found.nextCursor ?? "",
        };
      },
      async createTag(req) {
        return { created: await guard(() => audience.createTag(req.orgId, req.name, clock.nowMs())) };
      },
      async deleteTag(req) {
        if (!(await guard(() => audience.deleteTag(req.orgId, req.name))))
          throw new ConnectError(`no tag ${req.name}`, Code.NotFound);
        return {};
      },
    });
}
