import { type DomainDeps, checkAndSave } from "./domain_service";
import { LeasedLoop, type LoopParts } from "./leasedloop";

// The sending domains' records checked again on a schedule (DOMAIN_RECHECK_S after each check,
// five minutes after one DNS did not answer), by one daemon at a time: what the domain service's
// verify does, so a record that disappears turns the domain failed (and sends domain.failed),
// and a rotation's key starts signing once its record is published, without anyone asking.

/** Domains checked together in a round: their lookups run at once, and a round stays well within the lease. */
const ROUND = 10;
const TICK_MS = 1_000;
/** The longest wait between two rounds while nothing is due (or DOMAIN_RECHECK_S, if shorter). */
const IDLE_MAX_MS = 60_000;

export class DomainRecheck extends LeasedLoop {
  constructor(
    parts: LoopParts,
    private readonly deps: DomainDeps,
  ) {
    super(parts, {
      lease: "domain-recheck",
      tickMs: TICK_MS,
      idleMaxMs: Math.min(IDLE_MAX_MS, deps.recheckMs),
      what: "domain recheck",
    });
  }

  protected async round(): Promise<boolean> {
    const due = await this.deps.records.domains.due(this.deps.clock.nowMs(), ROUND);
    await Promise.all(due.map((row) => checkAndSave(this.deps, row)));
    return due.length > 0;
  }
}
