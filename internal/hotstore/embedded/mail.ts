import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { type Lane, MessageStatus } from "../../gen/mailcore/limiter/v1/mail_pb";
import { LANES } from "../../mail/policy";
import { joinTags, type MessageHistory } from "../../model/history";
import {
  type AckInput,
  type AckResult,
  ackedStatus,
  type DeliveryPolicy,
  type EnqueueInput,
  type EnqueueResult,
  type GuardReason,
  KEPT_ACK_MS,
  type LaneCounts,
  type LeasedRecord,
  leaseExpiryFails,
  type MailStore,
  nextSlot,
  RECOVER_BATCH,
  type RecoverResult,
  SENDING_STATE_TTL_MS,
  type ReleaseBatch,
  type RetryState,
  type Released,
  type SendingChange,
  type SendingState,
  type SlotPlan,
  type SlotRun,
  slotOf,
} from "../hotstore";
import type { SlotCounters } from "./counters";
import type { EmbeddedMessages, MessageRow, State } from "./messages";
import type { EmbeddedLaneSignals } from "./signals";

/**
 * The mail pipeline on the embedded message store: the accept step, the lanes' release with
 * their slots, leases, acks and the recovery of expired leases and due retries. Each operation
 * is one transaction.
 */
export class EmbeddedMail implements MailStore {
  private readonly db: Database;
  /** The organization each lane served last; the next slot goes to the next one after it. */
  private readonly lastServed = new Map<Lane, string>();

  constructor(
    private readonly messages: EmbeddedMessages,
    /** Whether the domain is a verified one of the organization: undefined when the organization is not projected (a miss). */
    private readonly domainVerified: (orgId: string, domain: string) => boolean | undefined,
    /** Each release is counted in the second of its slot (an organization's release rate). */
    private readonly released: SlotCounters<Lane>,
    private readonly signals: EmbeddedLaneSignals,
  ) {
    this.db = messages.db;
  }

  /** The accept step in one transaction; an accepted message signals its lane. */
  async enqueue(input: EnqueueInput, nowMs: number): Promise<EnqueueResult> {
    const result = this.db.transaction(() => this.enqueueTx(input, nowMs))();
    if (result.kind === "accepted") this.signals.signal({ kind: "waiting", lane: input.lane });
    return result;
  }

  private enqueueTx(input: EnqueueInput, now: number): EnqueueResult {
    const { orgId, messageId, mailbox, guards, idempotency } = input;
    if (idempotency) {
      const prev = this.db
        .query("SELECT body_hash, message_id FROM idempotency WHERE org_id = ? AND key = ? AND expires_ms > ?")
        .get(orgId, idempotency.key, now) as { body_hash: string; message_id: string } | null;
      if (prev)
        return prev.body_hash === idempotency.bodyHash
          ? { kind: "replayed", messageId: prev.message_id }
          : { kind: "conflict" };
    }
    const verified = this.domainVerified(orgId, input.fromDomain);
    if (verified === undefined) return { kind: "miss" };
    if (!verified) return { kind: "domain_not_verified" };
    const bytes = Buffer.byteLength(input.payload);
    const held = this.messages.held(orgId);
    if (held.n + 1 > input.queueCap.messages) return { kind: "queue_full", reason: "messages" };
    if (held.bytes + bytes > input.queueCap.bytes) return { kind: "queue_full", reason: "bytes" };

    let retry = 0;
    let reason: GuardReason = "bounce_cooldown";
    const refuse = (wait: number, why: GuardReason) => {
      if (wait > retry) [retry, reason] = [wait, why];
    };
    if (input.checkCooldown) {
      const cd = this.db.query("SELECT until_ms FROM cooldowns WHERE mailbox = ?").get(mailbox) as {
        until_ms: number;
      } | null;
      if (cd) refuse(cd.until_ms - now, "bounce_cooldown");
    }
    if (input.countGuards) {
      // An accept at t counts while now < t + window.
      this.db
        .query("DELETE FROM guard_log WHERE org_id = ? AND mailbox = ? AND at_ms <= ?")
        .run(orgId, mailbox, now - guards.longWindowMs);
      const times = (
        this.db
          .query("SELECT at_ms FROM guard_log WHERE org_id = ? AND mailbox = ? ORDER BY at_ms")
          .all(orgId, mailbox) as { at_ms: number }[]
      ).map((r) => r.at_ms);
      const recent = times.filter((t) => t > now - guards.shortWindowMs);
      // At most the window, as the Redis script does (an accept stamped after this call's now).
      if (recent.length >= guards.shortMax)
        refuse(
          Math.min(guards.shortWindowMs, recent[recent.length - guards.shortMax]! + guards.shortWindowMs - now),
          "short_window",
        );
      if (times.length >= guards.longMax)
        refuse(
          Math.min(guards.longWindowMs, times[times.length - guards.longMax]! + guards.longWindowMs - now),
          "long_window",
        );
    }
    if (retry > 0) return { kind: "limited", reason, retryAfterMs: retry };

    if (input.countGuards) {
      this.db
        .query("INSERT INTO guard_log (org_id, mailbox, at_ms, message_id, expires_ms) VALUES (?, ?, ?, ?, ?)")
        .run(orgId, mailbox, now, messageId, now + guards.longWindowMs);
    }
    this.db
      .query(
        `INSERT INTO messages (id, org_id, lane, payload, mailbox, from_header, to_header, subject, tags, status, attempts, created_ms, updated_ms, state, seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 'waiting', ?)`,
      )
      .run(
        messageId,
        orgId,
        input.lane,
        input.payload,
        mailbox,
        input.from,
        input.to,
        input.subject,
        joinTags(input.tags),
        MessageStatus.QUEUED,
        now,
        now,
        this.messages.tail(),
      );
    this.messages.event(messageId, now, MessageStatus.QUEUED, "accepted");
    this.messages.hold(orgId, 1, bytes);
    if (idempotency) {
      this.db
        .query(
          "INSERT OR REPLACE INTO idempotency (org_id, key, body_hash, message_id, expires_ms) VALUES (?, ?, ?, ?, ?)",
        )
        .run(orgId, idempotency.key, idempotency.bodyHash, messageId, now + idempotency.ttlMs);
    }
    return { kind: "accepted", messageId };
  }

  async release(lane: Lane, nowMs: number, plan: SlotPlan): Promise<ReleaseBatch> {
    const batch = this.db.transaction((): ReleaseBatch => {
      const nextOrg =
        // Organizations held in the lane are skipped: their messages wait, the slots go to the others.
        "SELECT org_id FROM messages WHERE lane = ?1 AND state = 'waiting' AND org_id > ?2 AND org_id NOT IN (SELECT org_id FROM lane_holds WHERE lane = ?1) ORDER BY org_id LIMIT 1";
      const saved = this.db.query("SELECT start, k, rate FROM lane_slots WHERE lane = ?").get(lane) as SlotRun | null;
      let run = nextSlot(saved, nowMs, plan);
      const released: Released[] = [];
      for (;;) {
        const org = (this.db.query(nextOrg).get(lane, this.lastServed.get(lane) ?? "") ??
          this.db.query(nextOrg).get(lane, "")) as { org_id: string } | null;
        if (!org) return { released, nextSlotMs: null };
        const slotMs = slotOf(run, run.k);
        if (released.length >= plan.max || slotMs > plan.untilMs) return { released, nextSlotMs: slotMs };
        const msg = this.db
          .query("SELECT id FROM messages WHERE lane = ? AND state = 'waiting' AND org_id = ? ORDER BY seq LIMIT 1")
          .get(lane, org.org_id) as { id: string };
        this.db
          .query("UPDATE messages SET state = 'ready', seq = ?, slot_ms = ? WHERE id = ?")
          .run(this.messages.tail(), slotMs, msg.id);
        this.db
          .query("INSERT OR REPLACE INTO lane_slots (lane, start, k, rate) VALUES (?, ?, ?, ?)")
          .run(lane, run.start, run.k, run.rate);
        this.messages.event(msg.id, nowMs, MessageStatus.QUEUED, "released");
        this.lastServed.set(lane, org.org_id);
        released.push({ orgId: org.org_id, messageId: msg.id, slotMs });
        run = nextSlot(run, nowMs, plan);
      }
    })();
    // An organization's release rate counts each message in the second of its slot.
    for (const r of batch.released) this.released.add(r.orgId, lane, 1, r.slotMs);
    if (batch.released.length > 0) this.signals.signal({ kind: "ready" });
    return batch;
  }

  async lease(max: number, nowMs: number, visibilityMs: number): Promise<LeasedRecord[]> {
    return this.db.transaction(() => {
      const out: LeasedRecord[] = [];
      const prefix = `ls_${randomBytes(8).toString("hex")}`;
      for (const lane of LANES) {
        const rows = this.db
          .query(
            "SELECT id, org_id, lane, payload, attempts, slot_ms FROM messages WHERE state = 'ready' AND lane = ? ORDER BY seq LIMIT ?",
          )
          .all(lane, max - out.length) as MessageRow[];
        for (const row of rows) {
          const leaseId = `${prefix}.${out.length}`;
          const attempt = row.attempts + 1;
          this.db
            .query(
              "UPDATE messages SET state = 'inflight', status = ?, attempts = ?, lease_id = ?, due_ms = ?, updated_ms = ? WHERE id = ?",
            )
            .run(MessageStatus.SENDING, attempt, leaseId, nowMs + visibilityMs, nowMs, row.id);
          this.messages.event(row.id, nowMs, MessageStatus.SENDING, `attempt ${attempt}`);
          out.push({
            leaseId,
            messageId: row.id,
            orgId: row.org_id,
            lane: row.lane as Lane,
            payload: row.payload,
            attempt,
            slotMs: row.slot_ms ?? 0,
          });
        }
      }
      return out;
    })();
  }

  async ack(input: AckInput, policy: DeliveryPolicy, nowMs: number): Promise<AckResult> {
    return this.db.transaction((): AckResult => {
      const row = this.db
        .query("SELECT status, lease_id, attempts, mailbox FROM messages WHERE id = ? AND org_id = ?")
        .get(input.messageId, input.orgId) as MessageRow | null;
      if (!row || row.status !== MessageStatus.SENDING || row.lease_id !== input.leaseId) {
        // Kept all the same: its message was delivered (or bounced, or deferred), which the
        // reconciliation must know if the message is lost or found stale.
        this.db
          .query(
            "INSERT OR REPLACE INTO kept_acks (org_id, message_id, outcome, detail, expires_ms) VALUES (?, ?, ?, ?, ?)",
          )
          .run(input.orgId, input.messageId, input.outcome, input.detail, nowMs + KEPT_ACK_MS);
        return { current: false, status: (row?.status ?? MessageStatus.UNSPECIFIED) as MessageStatus };
      }
      const { status, dueMs } = ackedStatus(input, row.attempts, policy, nowMs);
      if (status === MessageStatus.BOUNCED)
        this.db
          .query("INSERT OR REPLACE INTO cooldowns (mailbox, until_ms) VALUES (?, ?)")
          .run(row.mailbox, nowMs + policy.bounceCooldownMs);
      const state: State = status === MessageStatus.DEFERRED ? "deferred" : "done";
      const s = input.scheduled;
      this.db
        .query(
          `UPDATE messages SET status = ?, state = ?, lease_id = NULL, due_ms = ?, updated_ms = ?,
             first_ms = COALESCE(first_ms, ?), until_ms = COALESCE(?, until_ms), delayed = MAX(delayed, ?) WHERE id = ?`,
        )
        .run(
          status,
          state,
          dueMs,
          nowMs,
          s?.firstAttemptMs ?? null,
          s?.untilMs ?? null,
          s?.delayedNotice === undefined ? 0 : 1,
          input.messageId,
        );
      this.messages.addAttempts(input.messageId, input.attempts ?? []);
      this.messages.event(input.messageId, nowMs, status, input.detail);
      if (s?.delayedNotice !== undefined && status === MessageStatus.DEFERRED)
        this.messages.event(input.messageId, nowMs, MessageStatus.DELAYED, s.delayedNotice);
      return { current: true, status };
    })();
  }

  async retryState(orgId: string, messageId: string, leaseId: string): Promise<RetryState | null> {
    const row = this.db
      .query("SELECT status, lease_id, attempts, first_ms, delayed FROM messages WHERE id = ? AND org_id = ?")
      .get(messageId, orgId) as MessageRow | null;
    if (!row || row.status !== MessageStatus.SENDING || row.lease_id !== leaseId) return null;
    return { attempts: row.attempts, firstAttemptMs: row.first_ms, delayedSent: row.delayed === 1 };
  }

  async recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult> {
    const result = this.db.transaction((): RecoverResult => {
      const expired = this.db
        .query("SELECT id, attempts, until_ms FROM messages WHERE state = 'inflight' AND due_ms <= ? LIMIT ?")
        .all(nowMs, RECOVER_BATCH) as {
        id: string;
        attempts: number;
        until_ms: number | null;
      }[];
      let failed = 0;
      for (const { id, attempts, until_ms } of expired) {
        if (leaseExpiryFails(attempts, until_ms, policy, nowMs)) {
          this.db
            .query(
              "UPDATE messages SET state = 'done', status = ?, lease_id = NULL, due_ms = NULL, updated_ms = ? WHERE id = ?",
            )
            .run(MessageStatus.FAILED, nowMs, id);
          this.messages.event(id, nowMs, MessageStatus.FAILED, "lease expired after the last attempt");
          failed++;
          continue;
        }
        // Back at the head of its organization's queue in the lane, released again through the pacing.
        this.db
          .query(
            "UPDATE messages SET state = 'waiting', status = ?, lease_id = NULL, due_ms = NULL, seq = ?, updated_ms = ? WHERE id = ?",
          )
          .run(MessageStatus.QUEUED, this.messages.head(), nowMs, id);
        this.messages.event(id, nowMs, MessageStatus.QUEUED, "lease expired; back in its lane");
      }
      const due = this.db
        .query("SELECT id FROM messages WHERE state = 'deferred' AND due_ms <= ? LIMIT ?")
        .all(nowMs, RECOVER_BATCH) as { id: string }[];
      for (const { id } of due) {
        this.db
          .query(
            "UPDATE messages SET state = 'waiting', status = ?, due_ms = NULL, seq = ?, updated_ms = ? WHERE id = ?",
          )
          .run(MessageStatus.QUEUED, this.messages.tail(), nowMs, id);
        this.messages.event(id, nowMs, MessageStatus.QUEUED, "retry");
      }
      const { next } = this.db
        .query(
          "SELECT MIN(d) AS next FROM (SELECT MIN(due_ms) AS d FROM messages WHERE state = 'inflight' UNION ALL SELECT MIN(due_ms) FROM messages WHERE state = 'deferred')",
        )
        .get() as { next: number | null };
      return { expired: expired.length - failed, retried: due.length, failed, nextDueMs: next };
    })();
    if (result.expired + result.retried > 0) for (const lane of LANES) this.signals.signal({ kind: "waiting", lane });
    return result;
  }

  /** Each organization's sending state, in memory: a restart rebuilds it from the records on a miss. */
  private readonly sending = new Map<
    string,
    { loadedMs: number; suppressed: Map<string, string>; bulkPaused?: string }
  >();

  async sendingState(orgId: string, mailbox: string, nowMs: number): Promise<SendingState> {
    const s = this.sending.get(orgId);
    if (!s || nowMs - s.loadedMs >= SENDING_STATE_TTL_MS) return { kind: "miss" };
    return { kind: "known", suppressed: s.suppressed.get(mailbox), bulkPaused: s.bulkPaused };
  }

  async projectSending(orgId: string, change: SendingChange, nowMs: number): Promise<void> {
    let s = this.sending.get(orgId);
    if (change.loaded) {
      s = { loadedMs: nowMs, suppressed: new Map() };
      this.sending.set(orgId, s);
    }
    // A write-through to an organization not rebuilt yet: the rebuild will have it.
    if (!s) return;
    for (const [mailbox, reason] of change.suppressions ?? []) {
      if (reason === null) s.suppressed.delete(mailbox);
      else s.suppressed.set(mailbox, reason);
    }
    if (change.bulkPaused !== undefined) s.bulkPaused = change.bulkPaused ?? undefined;
  }

  async holdLane(orgId: string, lane: Lane, held: boolean): Promise<void> {
    if (held) this.db.query("INSERT OR IGNORE INTO lane_holds (lane, org_id) VALUES (?, ?)").run(lane, orgId);
    else if (this.db.query("DELETE FROM lane_holds WHERE lane = ? AND org_id = ?").run(lane, orgId).changes > 0)
      this.signals.signal({ kind: "waiting", lane });
  }

  async laneHolds(lane: Lane): Promise<string[]> {
    const rows = this.db.query("SELECT org_id FROM lane_holds WHERE lane = ? ORDER BY org_id").all(lane);
    return (rows as { org_id: string }[]).map((r) => r.org_id);
  }

  async coolDown(mailbox: string, nowMs: number, cooldownMs: number): Promise<number> {
    const untilMs = nowMs + cooldownMs;
    const row = this.db
      .query(
        "INSERT INTO cooldowns (mailbox, until_ms) VALUES (?, ?) ON CONFLICT (mailbox) DO UPDATE SET until_ms = MAX(until_ms, excluded.until_ms) RETURNING until_ms",
      )
      .get(mailbox, untilMs) as { until_ms: number };
    return row.until_ms;
  }

  async getMessage(orgId: string, messageId: string): Promise<MessageHistory | null> {
    const row = this.db
      .query("SELECT * FROM messages WHERE id = ? AND org_id = ?")
      .get(messageId, orgId) as MessageRow | null;
    return row ? this.messages.histories([row])[0]! : null;
  }

  async laneCounts(nowMs: number): Promise<LaneCounts[]> {
    const rows = this.db
      .query(
        "SELECT lane, state, COUNT(*) AS n, MIN(created_ms) AS oldest FROM messages WHERE state != 'done' GROUP BY lane, state",
      )
      .all() as { lane: number; state: State; n: number; oldest: number }[];
    return LANES.map((lane) => {
      const of = (state: State) => rows.find((r) => r.lane === lane && r.state === state);
      const waiting = of("waiting");
      return {
        lane,
        depth: waiting?.n ?? 0,
        ready: of("ready")?.n ?? 0,
        inFlight: of("inflight")?.n ?? 0,
        deferred: of("deferred")?.n ?? 0,
        oldestAgeMs: waiting ? Math.max(0, nowMs - waiting.oldest) : 0,
      };
    });
  }
}
