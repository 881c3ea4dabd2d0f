// The detail of a message's event when a delivery ended in a refusal that was classified
// (internal/feedback): the type, the enhanced status code and the receiver's diagnostic, in one
// line a person reads in the history ("hard bounce 5.1.1: 550 5.1.1 <kim@example.org>: user
// unknown") and the webhook events read back (bounceOfDetail), so the history keeps one string.

export type BounceKind = "hard" | "soft" | "policy";

export interface BounceDetail {
  type: BounceKind;
  /** The enhanced status code ("5.1.1"); "" when the refusal had none. */
  status: string;
  /** The receiver's reply or the report's diagnostic, as given. */
  diagnostic: string;
}

const SHAPE = /^(hard|soft|policy) bounce( [245]\.\d{1,3}\.\d{1,3})?: ([\s\S]*)$/;

/** The event detail of a classified refusal. */
export function bounceDetail(b: BounceDetail): string {
  return `${b.type} bounce${b.status ? ` ${b.status}` : ""}: ${b.diagnostic}`;
}

/** The classified refusal an event's detail tells of; undefined for any other detail. */
export function bounceOfDetail(detail: string): BounceDetail | undefined {
  const m = SHAPE.exec(detail);
  if (!m) return undefined;
  return { type: m[1] as BounceKind, status: m[2]?.trim() ?? "", diagnostic: m[3]! };
}
