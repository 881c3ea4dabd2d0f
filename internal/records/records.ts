import { join } from "node:path";
import { AudienceRecords } from "./audience";
import { CampaignRecords } from "./campaigns";
import { ComplaintRecords } from "./complaints";
import { ConsoleRecords } from "./console";
import { Db } from "./db";
import { DirectoryRecords } from "./directory";
import { DomainRecords } from "./domains";
import { HistoryRecords } from "./history";
import { IdempotencyRecords } from "./idempotency";
import { migrate } from "./migrations";
import { StatsRecords } from "./stats";
import { SuppressionRecords } from "./suppressions";
import { TrackingRecords } from "./tracking";
import { WebhookDeliveryRecords } from "./webhook_deliveries";
import { WebhookEndpointRecords } from "./webhook_endpoints";
import { WorkflowRecords } from "./workflows";

// The records: the system of record an operator backs up, queries and keeps for months, in SQL
// (a SQLite file under DATA_DIR by default, PostgreSQL when DATABASE_URL is set).

/** The SQLite file of the records under a data directory. */
export function sqliteRecordsFile(dataDir: string): string {
  return join(dataDir, "records.db");
}

export class Records {
  readonly directory: DirectoryRecords;
  readonly domains: DomainRecords;
  readonly history: HistoryRecords;
  readonly console: ConsoleRecords;
  readonly webhookEndpoints: WebhookEndpointRecords;
  readonly webhookDeliveries: WebhookDeliveryRecords;
  readonly audience: AudienceRecords;
  readonly campaigns: CampaignRecords;
  readonly workflows: WorkflowRecords;
  readonly idempotency: IdempotencyRecords;
  readonly stats: StatsRecords;
  readonly suppressions: SuppressionRecords;
  readonly complaints: ComplaintRecords;
  readonly tracking: TrackingRecords;

  constructor(readonly db: Db) {
    this.directory = new DirectoryRecords(db);
    this.domains = new DomainRecords(db);
    this.history = new HistoryRecords(db);
    this.console = new ConsoleRecords(db);
    this.webhookEndpoints = new WebhookEndpointRecords(db);
    this.webhookDeliveries = new WebhookDeliveryRecords(db);
    // Subscriber changes are announced to webhooks in the transaction that makes them.
    this.audience = new AudienceRecords(db, (sql, events, nowMs) =>
      this.webhookDeliveries.enqueueIn(sql, events, nowMs),
    );
    this.campaigns = new CampaignRecords(db);
    this.workflows = new WorkflowRecords(db);
    this.idempotency = new IdempotencyRecords(db);
    this.stats = new StatsRecords(db);
    // A listing is announced to webhooks in the transaction that makes it.
    this.suppressions = new SuppressionRecords(db, (sql, events, nowMs) =>
      this.webhookDeliveries.enqueueIn(sql, events, nowMs),
    );
    this.complaints = new ComplaintRecords(db);
    this.tracking = new TrackingRecords(db, (sql, events, nowMs) =>
      this.webhookDeliveries.enqueueIn(sql, events, nowMs),
    );
  }

  /** Opens the records and applies the pending migrations. */
  static async open(o: { databaseUrl?: string; sqliteFile: string }): Promise<Records> {
    const db = await Db.open({ url: o.databaseUrl, sqliteFile: o.sqliteFile });
    try {
      await migrate(db);
    } catch (err) {
      await db.close();
      throw err;
    }
    return new Records(db);
  }

  async ping(): Promise<void> {
    await this.db.run((sql) => sql`SELECT 1`);
  }

  close(): Promise<void> {
    return this.db.close();
  }
}
