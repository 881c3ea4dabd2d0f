import { MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";

// The webhook event types (docs/guide.md, "Webhooks"): what an endpoint may subscribe to.

export const WEBHOOK_EVENTS = [
  "email.queued",
  "email.delivered",
  "email.deferred",
  "email.delayed",
  "email.bounced",
  "email.failed",
  "email.complained",
  "email.suppressed",
  "email.opened",
  "email.clicked",
  "subscriber.created",
  "subscriber.updated",
  "subscriber.unsubscribed",
  "subscriber.deleted",
  "domain.verified",
  "domain.failed",
] as const;

/** The event of POST /api/v1/webhooks/{id}/test: sent on request, never subscribed to. */
export const TEST_EVENT = "webhook.test";

export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

export function isWebhookEvent(v: unknown): v is WebhookEventType {
  return (WEBHOOK_EVENTS as readonly unknown[]).includes(v);
}

/** The event a message status change is announced as; none for SENDING (a lease, not news). */
export const EMAIL_EVENT_OF_STATUS: Partial<Record<MessageStatus, WebhookEventType>> = {
  [MessageStatus.QUEUED]: "email.queued",
  [MessageStatus.DELIVERED]: "email.delivered",
  [MessageStatus.DEFERRED]: "email.deferred",
  [MessageStatus.DELAYED]: "email.delayed",
  [MessageStatus.BOUNCED]: "email.bounced",
  [MessageStatus.FAILED]: "email.failed",
};
