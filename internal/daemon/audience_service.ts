import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type AudienceService,
  type CreateTagRequest,
  type DeleteSubscriberRequest,
  type DeleteTagRequest,
  type GetSubscriberRequest,
  type ListSubscriberEventsRequest,
  type ListSubscribersRequest,
  type Subscriber as SubscriberMsg,
  type SubscriberChange as ChangeMsg,
  SubscriberSchema,
  SubscriberStatus,
  type UpdateSubscriberRequest,
  UpsertOutcome,
  type UpsertResult as UpsertResultMsg,
  UpsertResultSchema,
  type UpsertSubscribersRequest,
} from "../gen/mailcore/limiter/v1/audience_pb";
import type { UpsertResult } from "../records/audience";
import type { Fields, Subscriber, SubscriberChange, SubscriberStatus as Status } from "../records/audience_types";
import type { Records } from "../records/records";
import { guard, pageCursor } from "./rpc_errors";
import { tenantOf } from "./tenant";

// The audience RPCs over the records. The API front has validated every request; here the
// messages become record changes and back.

export interface AudienceDeps {
  records: Pick<Records, "audience">;
  clock: Clock;
  /** A subscriber changed: workflow runs may have started. */
  onChange: () => void;
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

/** AudienceService's methods, by name. */
export function audienceHandlers(deps: AudienceDeps): ServiceImpl<typeof AudienceService> {
  return {
    upsertSubscribers: (req, ctx) => upsertSubscribers(deps, tenantOf(ctx.values), req),
    updateSubscriber: (req, ctx) => updateSubscriber(deps, tenantOf(ctx.values), req),
    getSubscriber: (req, ctx) => getSubscriber(deps, tenantOf(ctx.values), req),
    deleteSubscriber: (req, ctx) => deleteSubscriber(deps, tenantOf(ctx.values), req),
    listSubscribers: (req, ctx) => listSubscribers(deps, tenantOf(ctx.values), req),
    listSubscriberEvents: (req, ctx) => listSubscriberEvents(deps, tenantOf(ctx.values), req),
    createTag: (req, ctx) => createTag(deps, tenantOf(ctx.values), req),
    deleteTag: (req, ctx) => deleteTag(deps, tenantOf(ctx.values), req),
  };
}

export async function upsertSubscribers(deps: AudienceDeps, orgId: string, req: UpsertSubscribersRequest) {
  const inputs = req.subscribers.map((m) => ({ ...toChange(m), email: m.email }));
  const results = await guard(() => deps.records.audience.upsertMany(orgId, inputs, deps.clock.nowMs()));
  deps.onChange();
  return { results: results.map((r) => (req.brief ? briefResultMsg(r) : toResultMsg(r))) };
}

export async function updateSubscriber(deps: AudienceDeps, orgId: string, req: UpdateSubscriberRequest) {
  const result = await guard(() =>
    deps.records.audience.update(orgId, req.ref, toChange(req.change, req.removeTags), deps.clock.nowMs()),
  );
  if (!result) throw notFound(req.ref);
  deps.onChange();
  return { result: toResultMsg(result) };
}

export async function getSubscriber(deps: AudienceDeps, orgId: string, req: GetSubscriberRequest) {
  const s = await guard(() => deps.records.audience.get(orgId, req.ref));
  if (!s) throw notFound(req.ref);
  return { subscriber: toSubscriberMsg(s) };
}

export async function deleteSubscriber(deps: AudienceDeps, orgId: string, req: DeleteSubscriberRequest) {
  if (!(await guard(() => deps.records.audience.delete(orgId, req.ref, deps.clock.nowMs())))) throw notFound(req.ref);
  return {};
}

export async function listSubscribers(deps: AudienceDeps, orgId: string, req: ListSubscribersRequest) {
  const p = page(req.limit, req.cursor);
  const filter = {
    tag: req.tag || undefined,
    status: STATUS_OF[req.status],
    emailPrefix: req.emailPrefix || undefined,
  };
  const found = await guard(() => deps.records.audience.list(orgId, filter, p.limit, p.cursor));
  return { subscribers: found.data.map(toSubscriberMsg), nextCursor: found.nextCursor ?? "" };
}

export async function listSubscriberEvents(deps: AudienceDeps, orgId: string, req: ListSubscriberEventsRequest) {
  const p = page(req.limit, req.cursor);
  const found = await guard(() => deps.records.audience.events(orgId, req.ref, p.limit, p.cursor));
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
}

export async function createTag(deps: AudienceDeps, orgId: string, req: CreateTagRequest) {
  return { created: await guard(() => deps.records.audience.createTag(orgId, req.name, deps.clock.nowMs())) };
}

export async function deleteTag(deps: AudienceDeps, orgId: string, req: DeleteTagRequest) {
  if (!(await guard(() => deps.records.audience.deleteTag(orgId, req.name))))
    throw new ConnectError(`no tag ${req.name}`, Code.NotFound);
  return {};
}
