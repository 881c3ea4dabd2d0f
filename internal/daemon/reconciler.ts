import type { Clock } from "../clock/clock";
import type { ReconcileStore, Written } from "../hotstore/hotstore";
import type { LimiterMetrics } from "../metrics/metrics";
import type { Records } from "../records/records";
import { LeasedLoop, type LoopParts } from "./leasedloop";

// The reconciliation of the hot store with the records: a message the records hold as accepted
// and not final, that the hot store no longer has (a failover that lost writes, a Redis started
// from an old snapshot, a FLUSHALL), is put back from the records (they keep its payload until it
// is final). One daemon at a time walks every such message every everyMs. A lost message is put
// back only once it has been missing for holdMs (the visibility timeout): a worker that leased it
// before the loss is then done with it, and its ack, which the hot store keeps for a message it
// does not have, finishes the message instead of a second delivery. A message whose ack came is
// put back at once, with its outcome. Before that walk, each round drops the copies the hot store
// has of an older state than the records (a Redis started from an old snapshot brings back
// messages delivered since): the records are written from the hot store, so they are never
// ahead of it unless it went back in time. Each round first brings the bulk lane's holds in line
// with the organizations whose bulk sends are paused, should the hot store have lost them.

/** Messages read from the records and asked of the hot store at a time. */
const PAGE = 500;
/** The longest rest while neither side has a message not yet final (a change ends it: wake()). */
const IDLE_MAX_MS = 30_000;

export interface ReconcilerParts extends LoopParts {
  reconcile: ReconcileStore;
  records: Records;
  clock: Clock;
  everyMs: number;
  /** How long a message must have been missing before it is put back in its lane. */
  holdMs: number;
  /** Brings the bulk lane's holds in line with the pauses in the records (SendingState.syncHolds). */
  syncHolds: () => Promise<void>;
  /** Counts what was put back and dropped when set. */
  metrics?: Pick<LimiterMetrics, "reconciled">;
}

export class Reconciler extends LeasedLoop {
  /** Messages found missing, by id: since when (this daemon's memory; a new lease holder starts over). */
  private missingSince = new Map<string, number>();

  constructor(private readonly o: ReconcilerParts) {
    super(o, {
      lease: "reconcile",
      tickMs: o.everyMs,
      idleMaxMs: Math.max(o.everyMs, IDLE_MAX_MS),
      what: "reconciliation",
    });
  }

  /**
   * Another daemon may have held the lease meanwhile and put back what this one had found missing:
   * times remembered from before would cut a new hold short (a message a worker still holds
   * delivered again), so the holds start over.
   */
  protected override leaseTaken(): void {
    this.missingSince.clear();
  }

  /** Busy while either side has a message not yet final: with none, nothing can be lost, and the loop rests until a change. */
  protected async round(): Promise<boolean> {
    // Before anything is put back: a paused organization's bulk messages are never released.
    await this.o.syncHolds();
    const here = await this.dropStale();
    const unfinished = await this.putBack();
    return here + unfinished > 0;
  }

  /** Drops the hot store's copies older than the records: they are put back from the records, or were final there. */
  private async dropStale(): Promise<number> {
    const { reconcile, records } = this.o;
    const here = await reconcile.unfinishedHere();
    const stale: Written[] = [];
    for (let i = 0; i < here.length; i += PAGE) {
      const part = here.slice(i, i + PAGE);
      const known = await records.history.versions(part.map((m) => m.id));
      for (const m of part) {
        const r = known.get(m.id);
        if (r && (r.final || r.version > m.version)) stale.push(m);
      }
    }
    // Dropped only if still at the version read: one that moved on since was not stale.
    const dropped = await reconcile.drop(stale);
    this.o.metrics?.reconciled.inc({ action: "dropped" }, dropped);
    if (dropped > 0)
      this.o.log.warn("dropped messages the hot store had at an older state than the records", { dropped });
    return here.length;
  }

  /** One walk over the messages the records hold as not final; puts back those that are due. Returns how many it walked. */
  private async putBack(): Promise<number> {
    const { reconcile, records, clock } = this.o;
    const now = clock.nowMs();
    const missing = new Map<string, number>();
    const due: string[] = [];
    let walked = 0;
    for (let after = ""; ; ) {
      const page = await records.history.unfinishedAfter(after, PAGE);
      walked += page.length;
      if (page.length === 0) break;
      const presence = await reconcile.presence(page);
      for (const [i, m] of page.entries()) {
        if (presence[i] === "here") continue;
        const since = this.missingSince.get(m.id) ?? now;
        missing.set(m.id, since);
        if (presence[i] === "acked" || now - since >= this.o.holdMs) due.push(m.id);
      }
      if (page.length < PAGE) break;
      after = page.at(-1)!.id;
    }
    this.missingSince = missing;
    for (let i = 0; i < due.length; i += PAGE) {
      const ids = due.slice(i, i + PAGE);
      // Read again: a message written final since the walk is not put back.
      const put = await reconcile.restore(await records.history.unfinished(ids), clock.nowMs());
      for (const id of ids) this.missingSince.delete(id);
      this.o.metrics?.reconciled.inc({ action: "requeued" }, put.requeued);
      this.o.metrics?.reconciled.inc({ action: "finished" }, put.finished);
      this.o.log.warn("put back messages the hot store had lost, from the records", { ...put });
    }
    return walked;
  }
}
