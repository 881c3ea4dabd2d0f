// The shapes of the audience that its records, their changes and the workflows they start
// share: a subscriber, a change of one, and the rows of its events.

export type SubscriberStatus = "subscribed" | "unsubscribed";
export type FieldValue = string | number | boolean | null;
export type Fields = Record<string, FieldValue>;

export interface Subscriber {
  id: string;
  email: string;
  name: string;
  status: SubscriberStatus;
  fields: Fields;
  tags: string[];
  createdMs: number;
  updatedMs: number;
}

/** What an upsert or a partial update may change; undefined leaves a part as it is. */
export interface SubscriberChange {
  name?: string;
  /** Merged into the subscriber's fields. */
  fields?: Fields;
  tags?: string[];
  /** Tags to take off (the tags endpoint's DELETE). */
  removeTags?: string[];
  status?: SubscriberStatus;
  /** The subscriber's tags become exactly `tags` (when given). */
  replaceTags?: boolean;
  /** Without it, an unsubscribed subscriber stays unsubscribed. */
  resubscribe?: boolean;
  /** Recorded with the change's events: whether they may start workflows. */
  triggerWorkflows: boolean;
}

export type EventType =
  | "subscriber.created"
  | "subscriber.updated"
  | "subscriber.unsubscribed"
  | "subscriber.resubscribed"
  | "tag.added"
  | "tag.removed"
  | "email.queued"
  | "email.delivered"
  | "email.bounced"
  | "email.complained"
  | "workflow.started"
  | "workflow.completed";

/** A row of subscriber_events. */
export type EventRow = ReturnType<typeof eventRow>;

export function eventRow(
  subscriberId: string,
  type: EventType,
  atMs: number,
  data: Record<string, unknown>,
  triggerWorkflows: boolean,
  dedupe: string | null = null,
) {
  return {
    subscriber_id: subscriberId,
    type,
    at_ms: atMs,
    data: JSON.stringify(data),
    trigger_workflows: triggerWorkflows ? 1 : 0,
    dedupe,
  };
}
