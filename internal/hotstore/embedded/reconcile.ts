import type { Database } from "bun:sqlite";
import { DeliveryOutcome, MessageStatus } from "../../gen/mailcore/limiter/v1/mail_pb";
import { LANES } from "../../mail/policy";
import { joinTags, type MessageHistory } from "../../model/history";
import type { MessageRef, Presence, ReconcileStore, RestoreResult, Written } from "../hotstore";
import type { EmbeddedMessages, State } from "./messages";
import type { EmbeddedLaneSignals } from "./signals";

/** The reconciliation's side of the embedded message store: what it has of messages, and putting back what it lost. */
export class EmbeddedReconcile implements ReconcileStore {
  private readonly db: Database;

  constructor(
    private readonly messages: EmbeddedMessages,
    private readonly signals: EmbeddedLaneSignals,
  ) {
    this.db = messages.db;
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
      for (const w of stale)
        if (this.messages.remove("id = ? AND org_id = ? AND v = ?", w.id, w.orgId, w.version)) dropped++;
      return dropped;
    })();
  }

  async restore(messages: MessageHistory[], nowMs: number): Promise<RestoreResult> {
    const result = this.db.transaction(() => {
      const put = { requeued: 0, finished: 0 };
      for (const m of messages) {
        if (this.db.query("SELECT 1 FROM messages WHERE id = ? AND org_id = ?").get(m.id, m.orgId)) continue;
        const ack = this.db
          .query("DELETE FROM kept_acks WHERE org_id = ? AND message_id = ? RETURNING outcome, detail")
          .get(m.orgId, m.id) as { outcome: DeliveryOutcome; detail: string } | null;
        let status = MessageStatus.QUEUED;
        let detail = "restored from the records; back in its lane";
        // Back at the head of its organization's queue, or at the tail for the retry of a deferred ack.
        let seq = this.messages.head();
        if (ack) {
          detail = ack.detail;
          if (ack.outcome === DeliveryOutcome.DELIVERED) status = MessageStatus.DELIVERED;
          else if (ack.outcome === DeliveryOutcome.BOUNCED) status = MessageStatus.BOUNCED;
          else if (ack.outcome === DeliveryOutcome.REJECTED) status = MessageStatus.FAILED;
          else seq = this.messages.tail();
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
        this.messages.hold(m.orgId, 1, Buffer.byteLength(m.payload ?? ""));
        this.messages.forget(m.id);
        this.messages.addAttempts(m.id, m.deliveryAttempts ?? []);
        for (const [i, e] of m.events.entries())
          this.db
            .query("INSERT INTO message_events (message_id, seq, at_ms, status, detail) VALUES (?, ?, ?, ?, ?)")
            .run(m.id, i, e.atMs, e.status, e.detail);
        this.messages.event(m.id, nowMs, status, detail);
        if (state === "waiting") put.requeued++;
        else put.finished++;
      }
      return put;
    })();
    if (result.requeued > 0) for (const lane of LANES) this.signals.signal({ kind: "waiting", lane });
    return result;
  }
}
