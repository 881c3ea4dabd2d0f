import type { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";

// A message's history as the hot store keeps it while the message is under way and the
// records keep it afterwards: below both, so that neither depends on the other for it.

export interface MessageEvent {
  status: MessageStatus;
  atMs: number;
  detail: string;
}

/**
 * One try of a delivery at a receiver (an MX host, or the relay), as the worker reported it:
 * kept with the message's history, oldest first.
 */
export interface DeliveryAttemptRecord {
  atMs: number;
  /** The MX host (or relay); "" when the try reached none. */
  host: string;
  /** The address connected to; "" when none was. */
  address: string;
  /** "none", "unverified" or "verified"; "" when unknown (the relay). */
  tls: string;
  /** Where it ended: "connect", "greeting", "ehlo", "starttls", "rset", "mail", "rcpt", "data", "queue". */
  stage: string;
  /** The receiver's reply, or what went wrong without one. */
  reply: string;
  /** The enhanced status code of the reply ("4.7.1"); "" when it had none. */
  enhancedCode: string;
}

export interface MessageHistory {
  id: string;
  orgId: string;
  lane: Lane;
  from: string;
  to: string;
  /** The recipient as the guards compare it (lower case, no +tag). */
  toMailbox: string;
  subject: string;
  /** The tags the send gave it. */
  tags: string[];
  status: MessageStatus;
  attempts: number;
  createdMs: number;
  updatedMs: number;
  /** Grows with every change in the hot store: an older copy never overwrites a newer one. */
  version: number;
  /** Every event so far, oldest first. */
  events: MessageEvent[];
  /** Every try at a receiver so far, oldest first (none for a fixture or the file sink; absent where not read). */
  deliveryAttempts?: DeliveryAttemptRecord[];
  /**
   * The message as the service serialized it (what a delivery needs), while it is not final:
   * the outbox hands it to the records so that a message lost by the hot store can be rebuilt
   * from them. Absent on a final message and where only the history is asked for.
   */
  payload?: string;
}

/** A message's tags as the stores keep them in one column: space-separated (a tag has no spaces). */
export const joinTags = (tags: readonly string[]): string => tags.join(" ");
export const splitTags = (s: string): string[] => (s === "" ? [] : s.split(" "));
