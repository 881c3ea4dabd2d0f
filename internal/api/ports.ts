import type { DomainService } from "../gen/mailcore/limiter/v1/domains_pb";
import type { Client } from "@connectrpc/connect";
import type { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import type { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import type { Email, Lane, MailService, MessageInfo, SendResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import type { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import type {
  CreateWebhookResponse,
  ListWebhookDeliveriesResponse,
  ListWebhooksResponse,
  RetryWebhookDeliveryResponse,
  TestWebhookResponse,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Admission, AdmitCall } from "../limiterclient/client";
import type { EndpointInput } from "../webhooks/endpoint";
import type { SendValidation } from "./validation";

// What the HTTP front calls, one port per job. Each port is the daemon's calls of one kind
// (daemon_ports.ts makes them over the daemon's clients; a test gives fakes of the same
// interfaces); every call fails closed by rejecting. Configuration is not here: see ApiOptions.

/** Each API request's admission (micro-batched to the daemon). */
export interface AdmissionPort {
  admit(call: AdmitCall): Promise<Admission>;
}

/** GET /readyz: whether the daemon serves. */
export interface HealthPort {
  ready(): Promise<boolean>;
}

/** A send, and a read of one message. */
export interface MailPort {
  /**
   * For the organization of the admission ticket. Rejects with NotQueued when the daemon is
   * certain it queued nothing; any other rejection leaves it open.
   */
  send(
    ticket: string,
    req: { lane: Lane; email: Email; idempotencyKey: string; bodyHash: string },
    requestId: string,
  ): Promise<SendResponse>;
  /** undefined when the ticket's organization has no such message. */
  getMessage(ticket: string, messageId: string): Promise<MessageInfo | undefined>;
}

/** The daemon refused a send and is certain it queued nothing. */
export class NotQueued extends Error {}

/** The activity log and the delivery figures: the daemon's RPCs as they are. */
export type ActivityCalls = Pick<Client<typeof MailService>, "listMessages" | "getMessageStats">;

/**
 * What the webhook routes need from the daemon, each for the organization of the admission
 * ticket; not found is undefined (or false), not an error.
 */
export interface WebhookCalls {
  /** idempotencyKey: the client's Idempotency-Key, null without one. */
  create(ticket: string, input: EndpointInput, idempotencyKey: string | null): Promise<CreateWebhookResponse>;
  list(ticket: string, limit: number, cursor: string): Promise<ListWebhooksResponse>;
  delete(ticket: string, id: string): Promise<boolean>;
  deliveries(
    ticket: string,
    id: string,
    limit: number,
    cursor: string,
  ): Promise<ListWebhookDeliveriesResponse | undefined>;
  /** undefined when the organization has no such webhook; idempotencyKey as for create. */
  test(ticket: string, id: string, idempotencyKey: string | null): Promise<TestWebhookResponse | undefined>;
  /** undefined when the organization has no such webhook or delivery; "pending" when it is not finished. */
  retry(ticket: string, id: string, deliveryId: string): Promise<RetryWebhookDeliveryResponse | "pending" | undefined>;
}

/** The daemon's audience RPCs, as they are. */
export type AudienceCalls = Client<typeof AudienceService>;

/** The daemon's automation RPCs (campaigns, workflows), as they are. */
export type AutomationCalls = Client<typeof AutomationService>;

/** The daemon's domain RPCs, as they are. */
export type DomainCalls = Client<typeof DomainService>;
/** The daemon's suppression-list RPCs, as they are. */
export type SuppressionCalls = Client<typeof SuppressionService>;

/** Every port of the HTTP front. */
export interface ApiPorts {
  admission: AdmissionPort;
  health: HealthPort;
  mail: MailPort;
  activity: ActivityCalls;
  webhooks: WebhookCalls;
  audience: AudienceCalls;
  automation: AutomationCalls;
  domains: DomainCalls;
  suppressions: SuppressionCalls;
  /** Validates a send body off the event loop (validation.ts); throws InvalidField. */
  validation: Pick<SendValidation, "validate">;
}
