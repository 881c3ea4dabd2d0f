import type { Database } from "bun:sqlite";
import type { Lane, MessageStatus } from "../../gen/mailcore/limiter/v1/mail_pb";
import { type DeliveryAttemptRecord, type MessageHistory, splitTags } from "../../model/history";

// The embedded message store: the SQLite tables of every message not yet settled in the
// records (with its events), the guard logs, bounce cooldowns, kept acks, idempotency records
// and the lanes' runs of slots. Everything accepted survives a crash of the daemon. Three seams
// work on it, each a file: mail.ts (the pipeline), outbox.ts (what the records writer copies)
// and reconcile.ts (what the reconciliation asks and puts back).

/**
 * A message's place: waiting in its lane, released and ready for a worker, leased to a worker
 * (inflight), waiting for a retry (deferred), or done (final, until it is settled in the records).
 */
export type State = "waiting" | "ready" | "inflight" | "deferred" | "done";

export interface MessageRow {
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
  first_ms: number | null;
  until_ms: number | null;
  delayed: number;
}

/** The tables, and what the seams share of them: queue places, events, and a message as the records keep it. */
export class EmbeddedMessages {
  /** Queue order: new entries take ++seq (the tail); a message put back takes --headSeq (the head). */
  private seq: number;
  private headSeq: number;

  constructor(readonly db: Database) {
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
      CREATE TABLE IF NOT EXISTS message_attempts (message_id TEXT NOT NULL, seq INTEGER NOT NULL, attempt TEXT NOT NULL,
        PRIMARY KEY (message_id, seq));
      CREATE TABLE IF NOT EXISTS guard_log (org_id TEXT NOT NULL, mailbox TEXT NOT NULL, at_ms INTEGER NOT NULL, message_id TEXT NOT NULL, expires_ms INTEGER NOT NULL);
      CREATE INDEX IF NOT EXISTS guard_log_mailbox ON guard_log (org_id, mailbox, at_ms);
      CREATE TABLE IF NOT EXISTS cooldowns (mailbox TEXT PRIMARY KEY, until_ms INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS kept_acks (org_id TEXT NOT NULL, message_id TEXT NOT NULL, outcome INTEGER NOT NULL,
        detail TEXT NOT NULL, expires_ms INTEGER NOT NULL, PRIMARY KEY (org_id, message_id));
      CREATE TABLE IF NOT EXISTS idempotency (org_id TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL, message_id TEXT NOT NULL,
        expires_ms INTEGER NOT NULL, PRIMARY KEY (org_id, key));
      CREATE TABLE IF NOT EXISTS lane_slots (lane INTEGER PRIMARY KEY, start INTEGER NOT NULL, k INTEGER NOT NULL, rate INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS lane_holds (lane INTEGER NOT NULL, org_id TEXT NOT NULL, PRIMARY KEY (lane, org_id));
    `);
    // Columns added after the first release of this file: the message's tags, whether the
    // records have its payload, and the slot its lane released it for.
    // An organization's holdings (its messages here and their payloads' bytes), which the queue
    // cap reads: kept with every message that comes or goes; counted once from the messages when
    // the table is new (a hot.db of an earlier version).
    if (!db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'held'").get()) {
      db.exec(`
        CREATE TABLE held (org_id TEXT PRIMARY KEY, n INTEGER NOT NULL, bytes INTEGER NOT NULL);
        INSERT INTO held SELECT org_id, COUNT(*), SUM(LENGTH(CAST(payload AS BLOB))) FROM messages GROUP BY org_id;
      `);
    }
    const columns = db.query("SELECT name FROM pragma_table_info('messages')").all() as { name: string }[];
    if (!columns.some((c) => c.name === "tags"))
      db.exec("ALTER TABLE messages ADD COLUMN tags TEXT NOT NULL DEFAULT ''");
    if (!columns.some((c) => c.name === "payload_written"))
      db.exec("ALTER TABLE messages ADD COLUMN payload_written INTEGER NOT NULL DEFAULT 0");
    if (!columns.some((c) => c.name === "slot_ms")) db.exec("ALTER TABLE messages ADD COLUMN slot_ms INTEGER");
    // The schedule in hours: the first attempt, the end of the retries, whether the delayed notice was recorded.
    if (!columns.some((c) => c.name === "first_ms")) db.exec("ALTER TABLE messages ADD COLUMN first_ms INTEGER");
    if (!columns.some((c) => c.name === "until_ms")) db.exec("ALTER TABLE messages ADD COLUMN until_ms INTEGER");
    if (!columns.some((c) => c.name === "delayed"))
      db.exec("ALTER TABLE messages ADD COLUMN delayed INTEGER NOT NULL DEFAULT 0");
    const bounds = db.query("SELECT COALESCE(MIN(seq), 0) AS lo, COALESCE(MAX(seq), 0) AS hi FROM messages").get() as {
      lo: number;
      hi: number;
    };
    this.seq = bounds.hi;
    this.headSeq = bounds.lo;
  }

  /** A place at the tail of its queue. */
  tail(): number {
    return ++this.seq;
  }

  /** A place at the head of its queue: a message put back. */
  head(): number {
    return --this.headSeq;
  }

  /** What an organization holds: its messages here, and their payloads' bytes. */
  held(orgId: string): { n: number; bytes: number } {
    return (
      (this.db.query("SELECT n, bytes FROM held WHERE org_id = ?").get(orgId) as {
        n: number;
        bytes: number;
      } | null) ?? { n: 0, bytes: 0 }
    );
  }

  /** A message came into (by 1) or left (by -1) the hot store, with a payload of `bytes`. */
  hold(orgId: string, by: 1 | -1, bytes: number): void {
    this.db
      .query(
        "INSERT INTO held (org_id, n, bytes) VALUES (?1, ?2, ?2 * ?3) ON CONFLICT (org_id) DO UPDATE SET n = n + ?2, bytes = bytes + ?2 * ?3",
      )
      .run(orgId, by, bytes);
    this.db.query("DELETE FROM held WHERE org_id = ? AND n <= 0").run(orgId);
  }

  /** Deletes a message (and its events and attempts) that matches `where`; whether there was one. Its organization holds it no more. */
  remove(where: string, ...params: (string | number)[]): boolean {
    const gone = this.db
      .query(`DELETE FROM messages WHERE ${where} RETURNING id, org_id, LENGTH(CAST(payload AS BLOB)) AS bytes`)
      .get(...params) as { id: string; org_id: string; bytes: number } | null;
    if (!gone) return false;
    this.forget(gone.id);
    this.hold(gone.org_id, -1, gone.bytes);
    return true;
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
  histories(rows: MessageRow[]): MessageHistory[] {
    if (rows.length === 0) return [];
    const events = new Map<string, MessageHistory["events"]>(rows.map((r) => [r.id, []]));
    const all = this.db
      .query(
        `SELECT message_id, at_ms, status, detail FROM message_events WHERE message_id IN (${rows.map(() => "?").join(",")}) ORDER BY message_id, seq`,
      )
      .all(...rows.map((r) => r.id)) as { message_id: string; at_ms: number; status: number; detail: string }[];
    for (const e of all)
      events.get(e.message_id)!.push({ status: e.status as MessageStatus, atMs: e.at_ms, detail: e.detail });
    const attempts = new Map<string, DeliveryAttemptRecord[]>(rows.map((r) => [r.id, []]));
    const tries = this.db
      .query(
        `SELECT message_id, attempt FROM message_attempts WHERE message_id IN (${rows.map(() => "?").join(",")}) ORDER BY message_id, seq`,
      )
      .all(...rows.map((r) => r.id)) as { message_id: string; attempt: string }[];
    for (const t of tries) attempts.get(t.message_id)!.push(JSON.parse(t.attempt) as DeliveryAttemptRecord);
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
      deliveryAttempts: attempts.get(row.id)!,
    }));
  }

  /** Deletes a message's events and tries (the message's row is gone). */
  forget(messageId: string): void {
    this.db.query("DELETE FROM message_events WHERE message_id = ?").run(messageId);
    this.db.query("DELETE FROM message_attempts WHERE message_id = ?").run(messageId);
  }

  /** Appends tries at receivers to a message's history (the event that comes with them marks it changed). */
  addAttempts(messageId: string, attempts: readonly DeliveryAttemptRecord[]): void {
    if (attempts.length === 0) return;
    const { n } = this.db.query("SELECT COUNT(*) AS n FROM message_attempts WHERE message_id = ?").get(messageId) as {
      n: number;
    };
    const insert = this.db.query("INSERT INTO message_attempts (message_id, seq, attempt) VALUES (?, ?, ?)");
    for (const [i, a] of attempts.entries()) insert.run(messageId, n + i, JSON.stringify(a));
  }

  /** Appends an event; the message is marked changed for the records. */
  event(messageId: string, atMs: number, status: MessageStatus, detail: string): void {
    const { v } = this.db.query("UPDATE messages SET v = v + 1, dirty = 1 WHERE id = ? RETURNING v").get(messageId) as {
      v: number;
    };
    this.db
      .query("INSERT INTO message_events (message_id, seq, at_ms, status, detail) VALUES (?, ?, ?, ?, ?)")
      .run(messageId, v - 1, atMs, status, detail);
  }
}
