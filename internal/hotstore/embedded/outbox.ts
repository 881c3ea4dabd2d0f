import type { Database } from "bun:sqlite";
import { FINAL_STATUSES } from "../../mail/policy";
import type { MessageHistory } from "../../model/history";
import { OUTBOX_PAYLOAD_BYTES, type OutboxStore, type Written } from "../hotstore";
import type { EmbeddedMessages, MessageRow } from "./messages";

/** The outbox of changed messages on the embedded message store: what the records writer copies, and settling it. */
export class EmbeddedOutbox implements OutboxStore {
  private readonly db: Database;

  constructor(private readonly messages: EmbeddedMessages) {
    this.db = messages.db;
  }

  async changedMessages(max: number): Promise<MessageHistory[]> {
    const rows = this.db
      .query("SELECT * FROM messages WHERE dirty = 1 ORDER BY updated_ms LIMIT ?")
      .all(max) as MessageRow[];
    // The records keep the payload of a message until it is final; it goes once, and a batch's
    // payloads stop at the budget (past its first message).
    const out: MessageHistory[] = [];
    let bytes = 0;
    for (const [i, m] of this.messages.histories(rows).entries()) {
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
        if (this.messages.remove("id = ? AND state = 'done'", w.id)) gone++;
      }
      return gone;
    })();
  }
}
