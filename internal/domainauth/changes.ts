import { type DomainRecord, type RecordStatus, recordKey } from "./records";

// What a check changed, for the events a domain sends (domain.verified, domain.failed) and for
// the log: pure, from the records of the last check and of this one.

/**
 * The domain's status from its records: failed when a record it waits on failed, verified when
 * all of them are verified, pending otherwise (and when there is none yet).
 */
export function domainStatus(records: readonly DomainRecord[]): RecordStatus {
  const required = records.filter((r) => r.required);
  if (required.some((r) => r.status === "failed")) return "failed";
  if (required.length > 0 && required.every((r) => r.status === "verified")) return "verified";
  return "pending";
}

export interface RecordChange {
  purpose: DomainRecord["purpose"];
  type: DomainRecord["type"];
  name: string;
  /** undefined: the record is new (a rotation's key, say). */
  from: RecordStatus | undefined;
  /** undefined: the record is no longer shown (a retired key). */
  to: RecordStatus | undefined;
  reason?: string;
}

export interface CheckChanges {
  /** The records whose status changed, in the order of the new check (removed ones last). */
  records: RecordChange[];
  /** The domain's status before and after, when it changed. */
  domain?: { from: RecordStatus; to: RecordStatus };
  /** The event to send: the domain became verified, or failed. */
  event?: "domain.verified" | "domain.failed";
}

/** What changed between the last check's records and this one's. */
export function whatChanged(previous: readonly DomainRecord[], current: readonly DomainRecord[]): CheckChanges {
  const before = new Map(previous.map((r) => [recordKey(r), r]));
  const now = new Set(current.map(recordKey));
  const records: RecordChange[] = [];
  for (const r of current) {
    const old = before.get(recordKey(r));
    if (old?.status === r.status) continue;
    records.push({ purpose: r.purpose, type: r.type, name: r.name, from: old?.status, to: r.status, reason: r.reason });
  }
  for (const r of previous)
    if (!now.has(recordKey(r)))
      records.push({ purpose: r.purpose, type: r.type, name: r.name, from: r.status, to: undefined });
  const from = domainStatus(previous);
  const to = domainStatus(current);
  if (from === to) return { records };
  const event = to === "verified" ? "domain.verified" : to === "failed" ? "domain.failed" : undefined;
  return event ? { records, domain: { from, to }, event } : { records, domain: { from, to } };
}
