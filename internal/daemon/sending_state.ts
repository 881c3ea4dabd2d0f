import type { Clock } from "../clock/clock";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MailStore } from "../hotstore/hotstore";
import { normalizeMailbox } from "../mail/policy";
import type { SuppressionReason } from "../mail/suppression";
import type { Logger } from "../log/log";
import type { Records } from "../records/records";

// What refuses an organization's send before the guards: its suppression list and the pause of
// its bulk sends. The records keep both; the accept step reads the hot store's copy, so a send
// never waits for the records (a locked or unreachable database stops no send). The copy is
// written through on every change and rebuilt from the records on a miss: a store that started
// empty, or a copy older than SENDING_STATE_TTL_MS. A send waits REBUILD_WAIT_MS at most for a
// rebuild: past it (the records locked or unreachable) it is not refused, the rebuild goes on,
// and the sends after it are checked against the rebuilt copy (fail open, and say so once).
// The pause also holds the organization's messages already queued in the bulk lane (holdLane),
// written through with it and again at each rebuild.

export type SendingRefusal =
  | { kind: "suppressed"; reason: SuppressionReason }
  /** A bulk send of an organization whose bulk sends are paused for its complaint rate. */
  | { kind: "bulk_paused"; reason: string };

/** The longest a send waits for its organization's copy to be rebuilt from the records. */
export const REBUILD_WAIT_MS = 250;

export class SendingState {
  /** Rebuilds under way, by organization: sends that miss at once wait for one. */
  private readonly rebuilding = new Map<string, Promise<void>>();
  /** Organizations whose sends went unchecked during the rebuild under way: said once per rebuild. */
  private readonly unchecked = new Set<string>();

  constructor(
    private readonly mail: Pick<MailStore, "sendingState" | "projectSending" | "holdLane" | "laneHolds">,
    private readonly records: Pick<Records, "suppressions" | "complaints">,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Why the send is refused; undefined when it is not. */
  async refusal(orgId: string, address: string, lane: Lane): Promise<SendingRefusal | undefined> {
    const mailbox = normalizeMailbox(address);
    let s = await this.mail.sendingState(orgId, mailbox, this.clock.nowMs());
    if (s.kind === "miss") {
      const rebuilt = await Promise.race([
        this.rebuild(orgId).then(() => true),
        Bun.sleep(REBUILD_WAIT_MS).then(() => false),
      ]);
      if (!rebuilt) {
        if (this.unchecked.has(orgId)) return undefined;
        this.unchecked.add(orgId);
        this.log.warn("a send was not checked against its organization's suppression list: the records are slow", {
          org: orgId,
          waitedMs: REBUILD_WAIT_MS,
        });
        return undefined;
      }
      s = await this.mail.sendingState(orgId, mailbox, this.clock.nowMs());
    }
    if (s.kind === "miss") return undefined;
    if (s.suppressed) return { kind: "suppressed", reason: s.suppressed as SuppressionReason };
    if (lane === Lane.BULK && s.bulkPaused) return { kind: "bulk_paused", reason: s.bulkPaused };
    return undefined;
  }

  /** After the records listed an address. */
  listed(orgId: string, address: string, reason: SuppressionReason): Promise<void> {
    return this.write(orgId, { suppressions: [[normalizeMailbox(address), reason]] });
  }

  /** After the records took an address off the list. */
  unlisted(orgId: string, address: string): Promise<void> {
    return this.write(orgId, { suppressions: [[normalizeMailbox(address), null]] });
  }

  /**
   * After the records paused (a reason) or resumed (null) the organization's bulk sends: new ones
   * refused, and those already queued held in the bulk lane until the resume.
   */
  async bulkPaused(orgId: string, reason: string | null): Promise<void> {
    await this.write(orgId, { bulkPaused: reason });
    await this.mail.holdLane(orgId, Lane.BULK, reason !== null);
  }

  /**
   * Brings the bulk lane's holds in line with the records: every organization they hold as paused
   * held, every other one let go. The reconciliation's round: a hot store that lost its holds (a
   * FLUSHALL, a failover) gets them back with the messages it puts back, and a hold written again
   * after a resume (a round that read the pauses before it) is let go at the next round.
   */
  async syncHolds(): Promise<void> {
    const paused = new Set(await this.records.complaints.allPaused());
    const held = new Set(await this.mail.laneHolds(Lane.BULK));
    for (const orgId of paused) if (!held.has(orgId)) await this.mail.holdLane(orgId, Lane.BULK, true);
    for (const orgId of held) if (!paused.has(orgId)) await this.mail.holdLane(orgId, Lane.BULK, false);
  }

  private write(orgId: string, change: Parameters<MailStore["projectSending"]>[1]): Promise<void> {
    return this.mail.projectSending(orgId, change, this.clock.nowMs());
  }

  private rebuild(orgId: string): Promise<void> {
    let running = this.rebuilding.get(orgId);
    if (!running) {
      running = (async () => {
        const [suppressions, paused] = await Promise.all([
          this.records.suppressions.all(orgId),
          this.records.complaints.paused(orgId),
        ]);
        await this.write(orgId, { suppressions, bulkPaused: paused?.reason ?? null, loaded: true });
        await this.mail.holdLane(orgId, Lane.BULK, paused !== undefined);
      })().finally(() => {
        this.rebuilding.delete(orgId);
        this.unchecked.delete(orgId);
      });
      // A send that stopped waiting leaves the rebuild to finish on its own; its failure is the next send's to retry.
      running.catch(() => {});
      this.rebuilding.set(orgId, running);
    }
    return running;
  }
}
