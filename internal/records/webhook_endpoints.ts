import { type Db, num, numOrNull, RecordError, randomId } from "./db";
import { BY_CREATED, mapPage, newestFirst, type Page } from "./paging";

// Webhook endpoints: where an organization's events are sent, and how each endpoint has fared
// (its health, and whether it was disabled). A workflow owns an endpoint row too (workflow_id
// set): its secret signs the workflow's webhook steps (step_deliveries.ts). Such a row is none of
// the organization's webhooks: the reads and writes here leave it out.

export interface WebhookEndpoint {
  id: string;
  orgId: string;
  url: string;
  events: string[];
  createdMs: number;
  disabledMs: number | null;
  disabledReason: string | null;
  /** When an attempt last succeeded and last failed (null: never), and the failures since the last success. */
  lastSuccessMs: number | null;
  lastFailureMs: number | null;
  consecutiveFailures: number;
}

function endpointOf(r: Record<string, unknown>): WebhookEndpoint {
  return {
    id: r.id as string,
    orgId: r.org_id as string,
    url: r.url as string,
    events: JSON.parse(r.events as string),
    createdMs: num(r.created_ms),
    disabledMs: numOrNull(r.disabled_ms),
    disabledReason: (r.disabled_reason as string | null) ?? null,
    lastSuccessMs: numOrNull(r.last_success_ms),
    lastFailureMs: numOrNull(r.last_failure_ms),
    consecutiveFailures: num(r.consecutive_failures ?? 0),
  };
}

export class WebhookEndpointRecords {
  constructor(private readonly db: Db) {}

  /**
   * Adds an endpoint, unless the organization has `max` already (a RecordError "too_many";
   * unset: no cap).
   * Creates that race are counted one after the other (PostgreSQL: a transaction lock per
   * organization; SQLite: one writer), so none passes the cap.
   */
  async create(o: {
    orgId: string;
    url: string;
    events: string[];
    secret: string;
    nowMs: number;
    max?: number;
  }): Promise<WebhookEndpoint> {
    const row = {
      id: randomId("wh"),
      org_id: o.orgId,
      url: o.url,
      events: JSON.stringify(o.events),
      secret: o.secret,
      created_ms: o.nowMs,
    };
    await this.db.tx(async (sql) => {
      if (this.db.dialect === "postgres") await sql`SELECT pg_advisory_xact_lock(hashtext(${`webhooks:${o.orgId}`}))`;
      const [{ n }] =
        await sql`SELECT COUNT(*) AS n FROM webhook_endpoints WHERE org_id = ${o.orgId} AND workflow_id IS NULL`;
      if (o.max !== undefined && num(n) >= o.max)
        throw new RecordError("too_many", `the organization has ${o.max} webhooks, the most it may: delete one first`);
      await sql`INSERT INTO webhook_endpoints ${sql(row)}`;
    });
    return endpointOf({ ...row, disabled_ms: null, disabled_reason: null });
  }

  async list(orgId: string, limit: number, cursor?: string): Promise<Page<WebhookEndpoint>> {
    const page = await this.db.run((sql) =>
      newestFirst<Record<string, unknown>>(
        sql,
        sql`SELECT * FROM webhook_endpoints WHERE org_id = ${orgId} AND workflow_id IS NULL`,
        BY_CREATED,
        {
          limit,
          cursor,
        },
      ),
    );
    return mapPage(page, endpointOf);
  }

  /** Deletes the endpoint with its deliveries; false when the organization has no such endpoint. */
  async delete(orgId: string, id: string): Promise<boolean> {
    const gone = await this.db.run(
      (sql) =>
        sql`DELETE FROM webhook_endpoints WHERE id = ${id} AND org_id = ${orgId} AND workflow_id IS NULL RETURNING id`,
    );
    return gone.length > 0;
  }
}
