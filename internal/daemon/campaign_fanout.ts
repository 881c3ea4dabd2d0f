import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { type Campaign, pending } from "../records/campaigns";
import { type AudienceSendParts, audienceEmail, newUnsubscribeToken, unverifiedDomain } from "./audience_email";
import { newMessageId } from "../mail/identity";
import { normalizeMailbox } from "../mail/policy";
import { LeasedLoop } from "./leasedloop";

// The fan-out of campaigns into the bulk lane: a page of the audience at a time, and only
// while the campaign has at most a page of messages not yet in a final state (its counts in
// the records), or the bulk lane has less than a page waiting (the counts trail the lane by
// the records writer's lag, which must not starve it). So the lane holds about two pages of a
// campaign however large its audience. Everything it needs to go on is in the records (the
// campaign's cursor and counts, the scheduled time), and one daemon runs it at a time (a
// lease), so a restart or another daemon resumes it.

/** Subscribers read (and messages queued) per page. */
export const CAMPAIGN_PAGE = 100;
const TICK_MS = 200;
/** The longest wait between two rounds while no campaign is sending or due. */
const IDLE_MAX_MS = 5_000;
/** Messages queued between turns of the event loop. */
const YIELD_EVERY = 5;

export class CampaignFanout extends LeasedLoop {
  constructor(private readonly o: AudienceSendParts) {
    super(o, { lease: "campaigns", tickMs: TICK_MS, idleMaxMs: IDLE_MAX_MS, what: "campaign fan-out" });
  }

  /** One round: starts what is due, then tops up every sending campaign by a page. */
  protected async round(): Promise<boolean> {
    const { records, clock } = this.o;
    await records.campaigns.startDue(clock.nowMs());
    const sending = await records.campaigns.sending();
    if (sending.length === 0) return false;
    const bulk = (await this.o.mail.laneCounts(clock.nowMs())).find((l) => l.lane === Lane.BULK);
    // depth: messages queued and not yet released.
    const laneLow = (bulk?.depth ?? 0) < CAMPAIGN_PAGE;
    for (const c of sending) {
      if (laneLow || pending(c) <= CAMPAIGN_PAGE) await this.page(c);
    }
    return true;
  }

  /**
   * Queues the next page of the campaign's audience. Ids and tokens are reserved before the
   * messages are queued, and each message has an idempotency key, so a page retried after a
   * crash queues nothing twice; the cursor moves once the page is queued.
   */
  private async page(c: Campaign): Promise<void> {
    const { records, clock } = this.o;
    const members = await records.campaigns.nextMembers(c, CAMPAIGN_PAGE);
    const done = members.length < CAMPAIGN_PAGE;
    // The organization's suppression list: skipped, and counted apart.
    const listed = await records.suppressions.listed(
      c.orgId,
      members.filter((m) => !m.skip).map((m) => m.email),
    );
    const sendTo = members.filter((m) => !m.skip && !listed.has(normalizeMailbox(m.email)));
    let suppressed = members.length - members.filter((m) => m.skip).length - sendTo.length;
    const reserved = await records.campaigns.reserve(
      c,
      sendTo.map((m) => ({ subscriberId: m.id, messageId: newMessageId(), token: newUnsubscribeToken() })),
    );
    let queued = 0;
    for (const [i, m] of sendTo.entries()) {
      // The embedded store answers without leaving the event loop: a page must not hold off the lanes' slots.
      if (i % YIELD_EVERY === YIELD_EVERY - 1) await new Promise((resolve) => setImmediate(resolve));
      const r = reserved.get(m.id)!;
      const result = await this.o.accept({
        orgId: c.orgId,
        lane: Lane.BULK,
        email: audienceEmail(c, m, { publicUrl: this.o.publicUrl, token: r.token }, c.id),
        idempotencyKey: `campaign:${c.id}:${m.id}`,
        bodyHash: c.id,
        messageId: r.messageId,
      });
      if (result.kind === "domain_not_verified") {
        await records.campaigns.fail(c.id, unverifiedDomain(c.fromAddress), clock.nowMs());
        return;
      }
      // The organization's queue is full: the page is queued again from its start on a later
      // round (what it queued so far is replayed, by its keys), once the lanes have drained it.
      if (result.kind === "queue_full") return;
      // Its bulk sends are paused for its complaint rate: the page waits for an operator to resume them.
      if (result.kind === "bulk_paused") return;
      if (result.kind === "accepted" || result.kind === "replayed") queued++;
      // Listed since the page was read.
      if (result.kind === "suppressed") suppressed++;
    }
    const throughSeq = members.at(-1)?.seq ?? c.lastSeq;
    await records.campaigns.advance(c, throughSeq, queued, members.length - queued, done, clock.nowMs(), suppressed);
  }
}
