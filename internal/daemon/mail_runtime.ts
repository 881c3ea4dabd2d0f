import type { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Lanes } from "../lanes/lanes";
import { Notifier } from "../lanes/notifier";
import type { ReleaseRecord } from "../lanes/scheduler";
import { LANES } from "../mail/policy";

/** The releases a daemon remembers per lane (LaneService's reports). */
const RELEASE_RING = 20_000;

/** What the daemon keeps in memory about sending: recent releases and who is waiting for work. */
export class MailRuntime {
  readonly work = new Notifier();
  /** Aborted at shutdown: the lease streams end (their leases stay with the workers). */
  readonly stopping = new AbortController();
  private readonly releases = new Map<Lane, ReleaseRecord[]>(LANES.map((lane) => [lane, []]));
  /** Lease id to the stream that holds it (lease id -> expiry), so an ack frees room on that stream. */
  readonly leaseOwners = new Map<string, Map<string, number>>();
  /** The recovery of the lanes, once they run: told when a lease runs out or a retry is due. */
  recovery: Pick<Lanes, "dueBy"> | undefined;

  /** onChange: a message changed here (accepted, released, acked): the records writer has work. */
  constructor(readonly onChange: () => void = () => {}) {}

  dueBy(ms: number): void {
    this.recovery?.dueBy(ms);
  }

  recordRelease(r: ReleaseRecord): void {
    const ring = this.releases.get(r.lane)!;
    ring.push(r);
    if (ring.length > RELEASE_RING) ring.splice(0, ring.length - RELEASE_RING);
    this.work.notifyAll();
    this.onChange();
  }

  /** The releases whose slots are at or after sinceMs (and at or before untilMs). */
  releasesSince(lane: Lane, sinceMs: number, untilMs = Number.POSITIVE_INFINITY): ReleaseRecord[] {
    return (this.releases.get(lane) ?? []).filter((r) => r.slotMs >= sinceMs && r.slotMs <= untilMs);
  }
}
