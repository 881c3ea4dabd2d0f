import type { Db } from "./db";

// The Idempotency-Key of a create that the records make (a campaign, a workflow, a webhook, a
// tag, a subscriber upsert): the answer it got, kept for a day. It is written in the create's
// own transaction (Db.within), so a create and its key commit together or not at all.

/** How long a key's answer is kept. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

export interface KeptAnswer {
  /** A hash of what was asked: the same key with another request is refused. */
  requestHash: string;
  /** The answer, as the caller encoded it. */
  response: string;
}

export class IdempotencyRecords {
  constructor(private readonly db: Db) {}

  /** The answer kept for the key, if it has not expired. */
  async find(orgId: string, keyHash: string, nowMs: number): Promise<KeptAnswer | undefined> {
    const rows = await this.db.run(
      (sql) =>
        sql`SELECT request_hash, response FROM idempotency_keys
            WHERE org_id = ${orgId} AND key_hash = ${keyHash} AND expires_ms > ${nowMs}`,
    );
    const row = rows[0] as { request_hash: string; response: string } | undefined;
    return row && { requestHash: row.request_hash, response: row.response };
  }

  /** Keeps an answer; the organization's expired keys go. A key kept meanwhile: a unique violation. */
  async keep(orgId: string, keyHash: string, answer: KeptAnswer, nowMs: number): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql`DELETE FROM idempotency_keys WHERE org_id = ${orgId} AND expires_ms <= ${nowMs}`;
      await sql`INSERT INTO idempotency_keys (org_id, key_hash, request_hash, response, expires_ms)
                VALUES (${orgId}, ${keyHash}, ${answer.requestHash}, ${answer.response}, ${nowMs + IDEMPOTENCY_TTL_MS})`;
    });
  }
}
