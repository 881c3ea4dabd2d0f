import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { DeliveryOutcome, type Lane, MessageStatus } from "../../gen/mailcore/limiter/v1/mail_pb";
import { LANES } from "../../mail/policy";
import { joinTags, type MessageHistory, splitTags } from "../../model/history";
import {
  type AckInput,
  type AckResult,
  type DeliveryPolicy,
  type EnqueueInput,
  type EnqueueResult,
  type GuardReason,
  type LaneCounts,
  KEPT_ACK_MS,
  type LeasedRecord,
  OUTBOX_PAYLOAD_BYTES,
  type MessageRef,
  type Presence,
  RECOVER_BATCH,
  type RecoverResult,
  nextSlot,
  type Released,
  type ReleaseBatch,
  type RestoreResult,
  type SlotPlan,
  type SlotRun,
  slotOf,
  type Written,
} from "../hotstore";
import { FINAL_STATUSES } from "../../mail/policy";

// A message's place: waiting in its lane, released and ready for a worker, leased to a
// worker (inflight), waiting for a retry (deferred), or done (final, until it is settled in
// the records).
type State = "waiting" | "ready" | "inflight" | "deferred" | "done";

interface MessageRow {
  id: string;
  org_id: string;
  lane: number;
  payload: string;
  mailbox: string;
  from_header: string;
  to_header: string;
  subject: string;
  tags: string;
  status: number;
  attempts: number;
  created_ms: number;
  updated_ms: number;
  v: number;
  state: State;
  lease_id: string | null;
  payload_written: number;
  slot_ms: number | null;
}

/**
 * The sending half of the embedded hot store, in SQLite so that everything accepted survives
 * a crash of the daemon. Each operation is one transaction.
 */
export class EmbeddedLanes {
  /** Queue order: new entries take ++seq (the tail); a message put back takes --headSeq (the head). */
  private seq: number;
  private headSeq: number;
  /** The organization each lane served last; the next slot goes to the next one after it. */
  private readonly lastServed = new Map<Lane, string>();

  constructor(private readonly db: Database) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS messages (
        id TEXT PRIMARY KEY, org_id TEXT NOT NULL, lane INTEGER NOT NULL, payload TEXT NOT NULL, mailbox TEXT NOT NULL,
        from_header TEXT NOT NULL, to_header TEXT NOT NULL, subject TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '',
        status INTEGER NOT NULL, attempts INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
        state TEXT NOT NULL, seq INTEGER NOT NULL, lease_id TEXT, due_ms INTEGER,
        v INTEGER NOT NULL DEFAULT 0, dirty INTEGER NOT NULL DEFAULT 0);
      CREATE INDEX IF NOT EXISTS messages_queue ON messages (lane, state, org_id, seq);
      CREATE INDEX IF NOT EXISTS messages_ready ON messages (state, lane, seq);
      CREATE INDEX IF NOT EXISTS messages_due ON messages (state, due_ms);
      CREATE INDEX IF NOT EXISTS messages_dirty ON messages (updated_ms) WHERE dirty = 1;
      CREATE TABLE IF NOT EXISTS message_events (message_id TEXT NOT NULL, seq INTEGER NOT NULL, at_ms INTEGER NOT NULL, status INTEGER NOT NULL,
        detail TEXT NOT NULL, PRIMARY KEY (message_id, seq));
      CREATE TABLE IF NOT EXISTS guard_log (org_id TEXT NOT NULL, mailbox TEXT NOT NULL, at_ms INTEGER NOT NULL, message_id TEXT NOT NULL, expires_ms INTEGER NOT NULL);
      CREATE INDEX IF NOT EXISTS guard_log_mailbox ON guard_log (org_id, mailbox, at_ms);
      CREATE TABLE IF NOT EXISTS cooldowns (mailbox TEXT PRIMARY KEY, until_ms INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS kept_acks (org_id TEXT NOT NULL, message_id TEXT NOT NULL, outcome INTEGER NOT NULL,
        detail TEXT NOT NULL, expires_ms INTEGER NOT NULL, PRIMARY KEY (org_id, message_id));
      CREATE TABLE IF NOT EXISTS idempotency (org_id TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL, message_id TEXT NOT NULL,
        expires_ms INTEGER NOT NULL, PRIMARY KEY (org_id, key));
      CREATE TABLE IF NOT EXISTS lane_slots (lane INTEGER PRIMARY KEY, start INTEGER NOT NULL, k INTEGER NOT NULL, rate INTEGER NOT NULL);
    `);
    // Columns added after the first release of this file: the message's tags, whether the
    // records have its payload, and the slot its lane released it for.
    const columns = db.query("SELECT name FROM pragma_table_info('messages')").all() as { name: string }[];
    if (!columns.some((c) => c.name === "tags"))
      db.exec("ALTER TABLE messages ADD COLUMN tags TEXT NOT NULL DEFAULT ''");
    if (!columns.some((c) => c.name === "payload_written"))
      db.exec("ALTER TABLE messages ADD COLUMN payload_written INTEGER NOT NULL DEFAULT 0");
    if (!columns.some((c) => c.name === "slot_ms")) db.exec("ALTER TABLE messages ADD COLUMN slot_ms INTEGER");
    const bounds = db.query("SELECT COALESCE(MIN(seq), 0) AS lo, COALESCE(MAX(seq), 0) AS hi FROM messages").get() as {
      lo: number;
      hi: number;
    };
    this.seq = bounds.hi;
    this.headSeq = bounds.lo;
  }

  /**
   * The accept step. domainVerified answers from the projection: true, false, or undefined
   * when the organization is not projected (a miss).
   */
  async enqueue(input: EnqueueInput, nowMs: number, domainVerified: () => boolean | undefined): Promise<EnqueueResult> {
    return this.db.transaction(() => this.enqueueTx(input, nowMs, domainVerified))();
  }

  private enqueueTx(input: EnqueueInput, now: number, domainVerified: () => boolean | undefined): EnqueueResult {
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
    const verified = domainVerified();
    if (verified === undefined) return { kind: "miss" };
    if (!verified) return { kind: "domain_not_verified" };

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
      if (recent.length >= guards.shortMax)
        refuse(recent[recent.length - guards.shortMax]! + guards.shortWindowMs - now, "short_window");
      if (times.length >= guards.longMax)
        refuse(times[times.length - guards.longMax]! + guards.longWindowMs - now, "long_window");
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
        ++this.seq,
      );
    this.event(messageId, now, MessageStatus.QUEUED, "accepted");
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
    return this.db.transaction((): ReleaseBatch => {
      const nextOrg =
        "SELECT org_id FROM messages WHERE lane = ? AND state = 'waiting' AND org_id > ? ORDER BY org_id LIMIT 1";
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
          .run(++this.seq, slotMs, msg.id);
        this.db
          .query("INSERT OR REPLACE INTO lane_slots (lane, start, k, rate) VALUES (?, ?, ?, ?)")
          .run(lane, run.start, run.k, run.rate);
        this.event(msg.id, nowMs, MessageStatus.QUEUED, "released");
        this.lastServed.set(lane, org.org_id);
        released.push({ orgId: org.org_id, messageId: msg.id, slotMs });
        run = nextSlot(run, nowMs, plan);
      }
    })();
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
          this.event(row.id, nowMs, MessageStatus.SENDING, `attempt ${attempt}`);
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
      let status: MessageStatus;
      let state: State = "done";
      let dueMs: number | null = null;
      if (input.outcome === DeliveryOutcome.DELIVERED) status = MessageStatus.DELIVERED;
      else if (input.outcome === DeliveryOutcome.BOUNCED) {
        status = MessageStatus.BOUNCED;
        this.db
          .query("INSERT OR REPLACE INTO cooldowns (mailbox, until_ms) VALUES (?, ?)")
          .run(row.mailbox, nowMs + policy.bounceCooldownMs);
      } else if (row.attempts >= policy.maxAttempts) status = MessageStatus.FAILED;
      else {
        status = MessageStatus.DEFERRED;
        state = "deferred";
        dueMs = nowMs + policy.retryBaseMs * 2 ** (row.attempts - 1);
      }
      this.db
        .query("UPDATE messages SET status = ?, state = ?, lease_id = NULL, due_ms = ?, updated_ms = ? WHERE id = ?")
        .run(status, state, dueMs, nowMs, input.messageId);
      this.event(input.messageId, nowMs, status, input.detail);
      return { current: true, status };
    })();
  }

  async recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult> {
    return this.db.transaction(() => {
      const expired = this.db
        .query("SELECT id, attempts FROM messages WHERE state = 'inflight' AND due_ms <= ? LIMIT ?")
        .all(nowMs, RECOVER_BATCH) as {
        id: string;
        attempts: number;
      }[];
      let failed = 0;
      for (const { id, attempts } of expired) {
        if (attempts >= policy.maxAttempts) {
          this.db
            .query(
              "UPDATE messages SET state = 'done', status = ?, lease_id = NULL, due_ms = NULL, updated_ms = ? WHERE id = ?",
            )
            .run(MessageStatus.FAILED, nowMs, id);
          this.event(id, nowMs, MessageStatus.FAILED, "lease expired after the last attempt");
          failed++;
          continue;
        }
        // Back at the head of its organization's queue in the lane, released again through the pacing.
        this.db
          .query(
            "UPDATE messages SET state = 'waiting', status = ?, lease_id = NULL, due_ms = NULL, seq = ?, updated_ms = ? WHERE id = ?",
          )
          .run(MessageStatus.QUEUED, --this.headSeq, nowMs, id);
        this.event(id, nowMs, MessageStatus.QUEUED, "lease expired; back in its lane");
      }
      const due = this.db
        .query("SELECT id FROM messages WHERE state = 'deferred' AND due_ms <= ? LIMIT ?")
        .all(nowMs, RECOVER_BATCH) as { id: string }[];
      for (const { id } of due) {
        this.db
          .query(
            "UPDATE messages SET state = 'waiting', status = ?, due_ms = NULL, seq = ?, updated_ms = ? WHERE id = ?",
          )
          .run(MessageStatus.QUEUED, ++this.seq, nowMs, id);
        this.event(id, nowMs, MessageStatus.QUEUED, "retry");
      }
      const { next } = this.db
        .query(
          "SELECT MIN(d) AS next FROM (SELECT MIN(due_ms) AS d FROM messages WHERE state = 'inflight' UNION ALL SELECT MIN(due_ms) FROM messages WHERE state = 'deferred')",
        )
        .get() as { next: number | null };
      return { expired: expired.length - failed, retried: due.length, failed, nextDueMs: next };
    })();
  }

  async getMessage(orgId: string, messageId: string): Promise<MessageHistory | null> {
    const row = this.db
      .query("SELECT * FROM messages WHERE id = ? AND org_id = ?")
      .get(messageId, orgId) as MessageRow | null;
    return row ? this.histories([row])[0]! : null;
  }

  async changedMessages(max: number): Promise<MessageHistory[]> {
    const rows = this.db
      .query("SELECT * FROM messages WHERE dirty = 1 ORDER BY updated_ms LIMIT ?")
      .all(max) as MessageRow[];
    // The records keep the payload of a message until it is final; it goes once, and a batch's
    // payloads stop at the budget (past its first message).
    const out: MessageHistory[] = [];
    let bytes = 0;
    for (const [i, m] of this.histories(rows).entries()) {
      const row = rows[i]!;
      if (FINAL_STATUSES.has(m.status) || row.payload_written === 1) {
        out.push(m);
        continue;
      }
      if (out.length > 0 && bytes + row.payload.length > OUTBOX_PAYLOAD_BYTES) break;
      bytes += row.payload.length;
      out.push({ ...m, payload: row.payload });
    }
    return out;
  }

  async presence(messages: MessageRef[]): Promise<Presence[]> {
    const here = this.db.query("SELECT 1 FROM messages WHERE id = ? AND org_id = ?");
    const acked = this.db.query("SELECT 1 FROM kept_acks WHERE message_id = ? AND org_id = ?");
    return messages.map(({ orgId, id }) => (here.get(id, orgId) ? "here" : acked.get(id, orgId) ? "acked" : "missing"));
  }

  async unfinishedHere(): Promise<Written[]> {
    return (
      this.db.query("SELECT org_id, id, v FROM messages WHERE state != 'done'").all() as {
        org_id: string;
        id: string;
        v: number;
      }[]
    ).map((r) => ({ orgId: r.org_id, id: r.id, version: r.v }));
  }

  async drop(stale: Written[]): Promise<number> {
    return this.db.transaction(() => {
      let dropped = 0;
      for (const w of stale) {
        const { changes } = this.db
          .query("DELETE FROM messages WHERE id = ? AND org_id = ? AND v = ?")
          .run(w.id, w.orgId, w.version);
        if (changes === 0) continue;
        this.db.query("DELETE FROM message_events WHERE message_id = ?").run(w.id);
        dropped++;
      }
      return dropped;
    })();
  }

  async restore(messages: MessageHistory[], nowMs: number): Promise<RestoreResult> {
    return this.db.transaction(() => {
      const result = { requeued: 0, finished: 0 };
      for (const m of messages) {
        if (this.db.query("SELECT 1 FROM messages WHERE id = ? AND org_id = ?").get(m.id, m.orgId)) continue;
        const ack = this.db
          .query("DELETE FROM kept_acks WHERE org_id = ? AND message_id = ? RETURNING outcome, detail")
          .get(m.orgId, m.id) as { outcome: DeliveryOutcome; detail: string } | null;
        let status = MessageStatus.QUEUED;
        let detail = "restored from the records; back in its lane";
        // Back at the head of its organization's queue, or at the tail for the retry of a deferred ack.
        let seq = --this.headSeq;
        if (ack) {
          detail = ack.detail;
          if (ack.outcome === DeliveryOutcome.DELIVERED) status = MessageStatus.DELIVERED;
          else if (ack.outcome === DeliveryOutcome.BOUNCED) status = MessageStatus.BOUNCED;
          else seq = ++this.seq;
        }
        const state: State = status === MessageStatus.QUEUED ? "waiting" : "done";
        this.db
          .query(
            `INSERT INTO messages (id, org_id, lane, payload, mailbox, from_header, to_header, subject, tags, status, attempts, created_ms, updated_ms, state, seq, v)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            m.id,
            m.orgId,
            m.lane,
            m.payload ?? "",
            m.toMailbox,
            m.from,
            m.to,
            m.subject,
            joinTags(m.tags),
            status,
            m.attempts,
            m.createdMs,
            nowMs,
            state,
            seq,
            m.events.length,
          );
        this.db.query("DELETE FROM message_events WHERE message_id = ?").run(m.id);
        for (const [i, e] of m.events.entries())
          this.db
            .query("INSERT INTO message_events (message_id, seq, at_ms, status, detail) VALUES (?, ?, ?, ?, ?)")
            .run(m.id, i, e.atMs, e.status, e.detail);
        this.event(m.id, nowMs, status, detail);
        if (state === "waiting") result.requeued++;
        else result.finished++;
      }
      return result;
    })();
  }

  async settle(written: Written[]): Promise<number> {
    return this.db.transaction(() => {
      let gone = 0;
      for (const w of written) {
        // The records have its payload now (written with the first batch that had the message).
        this.db.query("UPDATE messages SET payload_written = 1 WHERE id = ? AND org_id = ?").run(w.id, w.orgId);
        const { changes } = this.db
          .query("UPDATE messages SET dirty = 0 WHERE id = ? AND org_id = ? AND v = ?")
          .run(w.id, w.orgId, w.version);
        if (changes === 0) continue;
        const { changes: deleted } = this.db.query("DELETE FROM messages WHERE id = ? AND state = 'done'").run(w.id);
        if (deleted > 0) {
          this.db.query("DELETE FROM message_events WHERE message_id = ?").run(w.id);
          gone++;
        }
      }
      return gone;
    })();
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

  /** An organization's messages waiting in a lane. */
  orgDepth(orgId: string, lane: Lane): number {
    return (
      this.db
        .query("SELECT COUNT(*) AS n FROM messages WHERE org_id = ? AND lane = ? AND state = 'waiting'")
        .get(orgId, lane) as { n: number }
    ).n;
  }

  /** Drops what has expired: old guard entries, idempotency records, cooldowns. */
  sweep(nowMs: number): void {
    this.db.transaction(() => {
      this.db.query("DELETE FROM guard_log WHERE expires_ms <= ?").run(nowMs);
      this.db.query("DELETE FROM idempotency WHERE expires_ms <= ?").run(nowMs);
      this.db.query("DELETE FROM cooldowns WHERE until_ms <= ?").run(nowMs);
      this.db.query("DELETE FROM kept_acks WHERE expires_ms <= ?").run(nowMs);
    })();
  }

  /** The rows as the records keep them, with their events (read in one query). */
  private histories(rows: MessageRow[]): MessageHistory[] {
    if (rows.length === 0) return [];
    const events = new Map<string, MessageHistory["events"]>(rows.map((r) => [r.id, []]));
    const all = this.db
      .query(
        `SELECT message_id, at_ms, status, detail FROM message_events WHERE message_id IN (${rows.map(() => "?").join(",")}) ORDER BY message_id, seq`,
      )
      .all(...rows.map((r) => r.id)) as { message_id: string; at_ms: number; status: number; detail: string }[];
    for (const e of all)
      events.get(e.message_id)!.push({ status: e.status as MessageStatus, atMs: e.at_ms, detail: e.detail });
    return rows.map((row) => ({
      id: row.id,
      orgId: row.org_id,
      lane: row.lane as Lane,
      from: row.from_header,
      to: row.to_header,
      toMailbox: row.mailbox,
      subject: row.subject,
      tags: splitTags(row.tags),
      status: row.status as MessageStatus,
      attempts: row.attempts,
      createdMs: row.created_ms,
      updatedMs: row.updated_ms,
      version: row.v,
      events: events.get(row.id)!,
    }));
  }

  /** Appends an event; the message is marked changed for the records. */
  private event(messageId: string, atMs: number, status: MessageStatus, detail: string): void {
    const { v } = this.db.query("UPDATE messages SET v = v + 1, dirty = 1 WHERE id = ? RETURNING v").get(messageId) as {
      v: number;
    };
    this.db
      .query("INSERT INTO message_events (message_id, seq, at_ms, status, detail) VALUES (?, ?, ?, ?, ?)")
      .run(messageId, v - 1, atMs, status, detail);
  }
}
