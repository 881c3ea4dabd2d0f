import type { Db, Dialect, Sql } from "./db";
import { identityColumn, num } from "./db";
import { automationTables } from "./automation_schema";

// Versioned migrations of the records. A released migration is never edited: a change is a new
// migration. Each runs in its own transaction; the daemon applies the pending ones at start
// (and `bun run cmd/admin migrate` does), under a database-wide lock, so two daemons starting
// at once migrate once. The SQL is the same on SQLite and PostgreSQL unless a migration says
// otherwise. Times are milliseconds since the epoch (BIGINT).

export interface Migration {
  version: number;
  name: string;
  up: string[] | ((dialect: Dialect) => string[]);
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "directory: organizations, API tokens, sending domains, tags",
    up: [
      `CREATE TABLE organizations (
        id TEXT PRIMARY KEY,
        slug TEXT NOT NULL UNIQUE,
        plan SMALLINT NOT NULL,
        version BIGINT NOT NULL,
        created_ms BIGINT NOT NULL)`,
      `CREATE TABLE api_tokens (
        hash TEXT PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        org_id TEXT NOT NULL REFERENCES organizations (id),
        name TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        last_used_ms BIGINT,
        revoked_ms BIGINT)`,
      "CREATE INDEX api_tokens_org ON api_tokens (org_id, created_ms)",
      `CREATE TABLE sending_domains (
        org_id TEXT NOT NULL REFERENCES organizations (id),
        name TEXT NOT NULL,
        verified SMALLINT NOT NULL,
        created_ms BIGINT NOT NULL,
        PRIMARY KEY (org_id, name))`,
      `CREATE TABLE tags (
        org_id TEXT NOT NULL REFERENCES organizations (id),
        name TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        PRIMARY KEY (org_id, name))`,
    ],
  },
  {
    version: 2,
    name: "message history: messages and their events",
    up: [
      `CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL,
        lane SMALLINT NOT NULL,
        from_header TEXT NOT NULL,
        to_header TEXT NOT NULL,
        to_mailbox TEXT NOT NULL,
        subject TEXT NOT NULL,
        status SMALLINT NOT NULL,
        attempts INTEGER NOT NULL,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        version BIGINT NOT NULL)`,
      "CREATE INDEX messages_org_mailbox ON messages (org_id, to_mailbox, created_ms)",
      "CREATE INDEX messages_updated ON messages (updated_ms)",
      `CREATE TABLE message_events (
        message_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        status SMALLINT NOT NULL,
        at_ms BIGINT NOT NULL,
        detail TEXT NOT NULL,
        PRIMARY KEY (message_id, seq))`,
    ],
  },
  {
    version: 3,
    name: "audience: subscribers, their tags and events",
    up: (dialect) => {
      const identity = identityColumn(dialect);
      return [
        `CREATE TABLE subscribers (
        seq ${identity},
        id TEXT NOT NULL UNIQUE,
        org_id TEXT NOT NULL REFERENCES organizations (id),
        email TEXT NOT NULL,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        fields TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        UNIQUE (org_id, email))`,
        "CREATE INDEX subscribers_org_seq ON subscribers (org_id, seq)",
        // subscriber_seq is the subscriber's seq: a list by tag walks this index newest first.
        `CREATE TABLE subscriber_tags (
        subscriber_id TEXT NOT NULL,
        org_id TEXT NOT NULL,
        tag TEXT NOT NULL,
        subscriber_seq BIGINT NOT NULL,
        PRIMARY KEY (subscriber_id, tag))`,
        "CREATE INDEX subscriber_tags_org_tag ON subscriber_tags (org_id, tag, subscriber_seq)",
        `CREATE TABLE subscriber_events (
        seq ${identity},
        subscriber_id TEXT NOT NULL,
        type TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        data TEXT NOT NULL,
        trigger_workflows SMALLINT NOT NULL,
        dedupe TEXT)`,
        "CREATE INDEX subscriber_events_subscriber ON subscriber_events (subscriber_id, seq)",
        // Only the events of messages have a key (a message written twice records its events once).
        "CREATE UNIQUE INDEX subscriber_events_dedupe ON subscriber_events (subscriber_id, dedupe) WHERE dedupe IS NOT NULL",
        // Kept with every change of subscriber_tags: GET /api/v1/tags reads counts, never counts.
        "ALTER TABLE tags ADD COLUMN subscribers BIGINT NOT NULL DEFAULT 0",
      ];
    },
  },
  {
    version: 4,
    name: "console: users, sessions, sign-in failures; the DNS verification value of sending domains",
    up: (dialect) => [
      `CREATE TABLE console_users (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES organizations (id),
        email TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        created_ms BIGINT NOT NULL)`,
      "CREATE INDEX console_users_org ON console_users (org_id)",
      `CREATE TABLE console_sessions (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES console_users (id),
        csrf TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL)`,
      "CREATE INDEX console_sessions_expiry ON console_sessions (expires_ms)",
      `CREATE TABLE console_signin_failures (
        subject TEXT NOT NULL,
        at_ms BIGINT NOT NULL)`,
      "CREATE INDEX console_signin_failures_subject ON console_signin_failures (subject, at_ms)",
      "CREATE INDEX console_signin_failures_at ON console_signin_failures (at_ms)",
      "ALTER TABLE sending_domains ADD COLUMN verify_value TEXT",
      // Domains added before: a random value each, so they can be verified through the console.
      dialect === "postgres"
        ? "UPDATE sending_domains SET verify_value = md5(random()::text || clock_timestamp()::text || org_id || name)"
        : "UPDATE sending_domains SET verify_value = lower(hex(randomblob(16)))",
    ],
  },
  {
    version: 5,
    name: "webhooks: endpoints, deliveries (with their due time and lease) and attempts",
    up: [
      `CREATE TABLE webhook_endpoints (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES organizations (id),
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        failing_since_ms BIGINT,
        disabled_ms BIGINT,
        disabled_reason TEXT)`,
      "CREATE INDEX webhook_endpoints_org ON webhook_endpoints (org_id, created_ms)",
      // state: 0 pending, 1 delivered, 2 failed. A pending delivery is due at due_ms; a claim
      // moves due_ms to the end of its lease, so an attempt whose worker died is due again then.
      `CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        event_type TEXT NOT NULL,
        payload TEXT NOT NULL,
        state SMALLINT NOT NULL,
        attempts INTEGER NOT NULL,
        due_ms BIGINT NOT NULL,
        lease_token TEXT,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL)`,
      "CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_ms)",
      "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_ms) WHERE state = 0",
      "CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_ms) WHERE state <> 0",
      `CREATE TABLE webhook_attempts (
        delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        at_ms BIGINT NOT NULL,
        duration_ms INTEGER NOT NULL,
        status_code INTEGER,
        error TEXT NOT NULL,
        PRIMARY KEY (delivery_id, attempt))`,
    ],
  },
  {
    version: 6,
    name: "automation: campaigns, their messages and unsubscribe tokens, workflows and their runs",
    up: (dialect) => automationTables(dialect),
  },
  {
    version: 7,
    name: "workflow webhooks: a workflow's signing endpoint, the URL and waiting run of a step's delivery",
    up: [
      // A workflow's webhook steps are deliveries of an endpoint row the workflow owns (its
      // secret); such a row subscribes to no event and is not one of the organization's webhooks.
      "ALTER TABLE webhook_endpoints ADD COLUMN workflow_id TEXT",
      "CREATE UNIQUE INDEX webhook_endpoints_workflow ON webhook_endpoints (workflow_id) WHERE workflow_id IS NOT NULL",
      // A step's delivery goes to the step's URL (null: the endpoint's) and wakes its run when it ends.
      "ALTER TABLE webhook_deliveries ADD COLUMN url TEXT",
      "ALTER TABLE webhook_deliveries ADD COLUMN run_id TEXT",
    ],
  },
  {
    version: 8,
    name: "idempotency keys of the record-bound creates",
    up: [
      `CREATE TABLE idempotency_keys (
        org_id TEXT NOT NULL,
        key_hash TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        response TEXT NOT NULL,
        expires_ms BIGINT NOT NULL,
        PRIMARY KEY (org_id, key_hash))`,
    ],
  },
  {
    version: 9,
    name: "the payload of every message not yet final, to rebuild a message the hot store lost",
    up: [
      // Null once the message is final: the records keep bodies only for the backlog.
      "ALTER TABLE messages ADD COLUMN payload TEXT",
      // The reconciliation walks the messages not yet final by id.
      "CREATE INDEX messages_unfinished ON messages (id) WHERE payload IS NOT NULL",
    ],
  },
  {
    version: 10,
    name: "activity: the messages' tags and list indexes, hourly message counts, webhook endpoint health",
    up: [
      // Space-separated (a tag has no spaces); message_tags is what a list by tag walks.
      "ALTER TABLE messages ADD COLUMN tags TEXT NOT NULL DEFAULT ''",
      `CREATE TABLE message_tags (
        message_id TEXT NOT NULL,
        org_id TEXT NOT NULL,
        tag TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        PRIMARY KEY (message_id, tag))`,
      // GET /api/v1/emails walks one of these newest first, by (created_ms, id), per filter.
      "CREATE INDEX message_tags_org_tag ON message_tags (org_id, tag, created_ms, message_id)",
      "CREATE INDEX messages_org_created ON messages (org_id, created_ms, id)",
      "CREATE INDEX messages_org_status ON messages (org_id, status, created_ms, id)",
      "CREATE INDEX messages_org_lane ON messages (org_id, lane, created_ms, id)",
      "CREATE INDEX messages_org_to ON messages (org_id, to_mailbox, created_ms, id)",
      "DROP INDEX messages_org_mailbox",
      // Counts per organization, hour and kind (accepted, delivered, ..., refused_quota, ...),
      // added to where the events are written: GET /api/v1/stats/emails reads them, never counts.
      `CREATE TABLE message_stats (
        org_id TEXT NOT NULL,
        hour_ms BIGINT NOT NULL,
        kind TEXT NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (org_id, hour_ms, kind))`,
      "ALTER TABLE webhook_endpoints ADD COLUMN last_success_ms BIGINT",
      "ALTER TABLE webhook_endpoints ADD COLUMN last_failure_ms BIGINT",
      "ALTER TABLE webhook_endpoints ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0",
    ],
  },
  {
    version: 11,
    name: "webhook attempts: the start of the receiver's answer",
    up: ["ALTER TABLE webhook_attempts ADD COLUMN response_excerpt TEXT NOT NULL DEFAULT ''"],
  },
  {
    version: 13,
    name: "history: each try of a delivery at a receiver",
    up: [
      // Kept with the message's events, and deleted with them after the retention.
      `CREATE TABLE message_attempts (
        message_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at_ms BIGINT NOT NULL,
        host TEXT NOT NULL,
        address TEXT NOT NULL,
        tls TEXT NOT NULL,
        stage TEXT NOT NULL,
        reply TEXT NOT NULL,
        enhanced_code TEXT NOT NULL,
        PRIMARY KEY (message_id, seq))`,
    ],
  },
  {
    version: 17,
    name: "tenants apart: a sign-in's charge, given back when it succeeds; a console session's last use",
    up: [
      // The attempt that charged a row: a successful sign-in takes its own charge back.
      "ALTER TABLE console_signin_failures ADD COLUMN charge TEXT",
      "CREATE INDEX console_signin_failures_charge ON console_signin_failures (charge)",
      "ALTER TABLE console_sessions ADD COLUMN last_seen_ms BIGINT NOT NULL DEFAULT 0",
      "UPDATE console_sessions SET last_seen_ms = created_ms",
    ],
  },
  {
    version: 18,
    name: "sending domains: an id, their DKIM keys (sealed), the last check of their records",
    up: (dialect) => [
      "ALTER TABLE sending_domains ADD COLUMN id TEXT",
      dialect === "postgres"
        ? "UPDATE sending_domains SET id = 'dom_' || substr(md5(random()::text || clock_timestamp()::text || org_id || name), 1, 24)"
        : "UPDATE sending_domains SET id = 'dom_' || lower(hex(randomblob(12)))",
      "CREATE UNIQUE INDEX sending_domains_id ON sending_domains (id)",
      "CREATE INDEX sending_domains_name ON sending_domains (name)",
      // The records of the last check (JSON, as the API shows them) and when it was.
      "ALTER TABLE sending_domains ADD COLUMN checked_json TEXT",
      "ALTER TABLE sending_domains ADD COLUMN checked_ms BIGINT",
      // When the recheck loop checks it next (null: at once).
      "ALTER TABLE sending_domains ADD COLUMN next_check_ms BIGINT",
      "CREATE INDEX sending_domains_next_check ON sending_domains (next_check_ms)",
      // 1 when the last check found an active key's DKIM record failed (the alert counts them).
      "ALTER TABLE sending_domains ADD COLUMN dkim_failing SMALLINT NOT NULL DEFAULT 0",
      // state: active (signs), pending (a rotation's, until its record verifies), retired
      // (signed before; its record removable after a grace period from changed_ms).
      `CREATE TABLE dkim_keys (
        org_id TEXT NOT NULL,
        domain TEXT NOT NULL,
        selector TEXT NOT NULL,
        algorithm TEXT NOT NULL,
        public_key TEXT NOT NULL,
        sealed_key TEXT NOT NULL,
        state TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        changed_ms BIGINT NOT NULL,
        PRIMARY KEY (org_id, domain, selector))`,
    ],
  },
  {
    version: 19,
    name: "suppression list: the addresses an organization sends nothing to, soft bounces counted, bulk sends paused for complaints, opens and clicks; campaigns count the suppressed",
    up: (dialect) => [
      // One row per organization and mailbox (normalised as the recipient guards do); seq
      // orders the list, newest first, and keys its cursors.
      `CREATE TABLE suppressions (
        seq ${identityColumn(dialect)},
        org_id TEXT NOT NULL,
        email TEXT NOT NULL,
        reason TEXT NOT NULL,
        detail TEXT NOT NULL,
        message_id TEXT,
        created_ms BIGINT NOT NULL)`,
      "CREATE UNIQUE INDEX suppressions_org_email ON suppressions (org_id, email)",
      "CREATE INDEX suppressions_org_seq ON suppressions (org_id, seq)",
      "CREATE INDEX suppressions_org_reason ON suppressions (org_id, reason, seq)",
      "ALTER TABLE campaigns ADD COLUMN suppressed BIGINT NOT NULL DEFAULT 0",
      // An organization's soft bounces of a mailbox since its last delivery (a delivery deletes
      // them): what the soft-bounce rule counts.
      `CREATE TABLE soft_bounces (
        org_id TEXT NOT NULL,
        email TEXT NOT NULL,
        message_id TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (org_id, email, message_id))`,
      // An organization whose complaint rate went past the limit: its bulk sends are refused
      // until an operator resumes them.
      // Each open and click of a tracked message, and whether it was likely a machine's.
      `CREATE TABLE tracking_hits (
        seq ${identityColumn(dialect)},
        org_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        link INTEGER NOT NULL,
        at_ms BIGINT NOT NULL,
        machine SMALLINT NOT NULL,
        reason TEXT NOT NULL)`,
      "CREATE INDEX tracking_hits_message ON tracking_hits (message_id, at_ms)",
      `CREATE TABLE bulk_pauses (
        org_id TEXT PRIMARY KEY,
        paused_ms BIGINT NOT NULL,
        reason TEXT NOT NULL)`,
    ],
  },
];

/** The lock that serializes migrations between processes (PostgreSQL advisory lock key). */
const MIGRATION_LOCK = 0x6d61696c; // "mail"

export interface MigrateResult {
  /** Versions applied by this call, in order. */
  applied: number[];
  /** The database's version afterwards. */
  version: number;
}

export class MigrationError extends Error {}

/** Applies the pending migrations (up to upTo, default all). */
export async function migrate(
  db: Db,
  o: { upTo?: number; migrations?: readonly Migration[]; nowMs?: number } = {},
): Promise<MigrateResult> {
  const migrations = o.migrations ?? MIGRATIONS;
  const known = migrations.at(-1)?.version ?? 0;
  const target = o.upTo ?? known;
  return db.exclusive(MIGRATION_LOCK, async (sql) => {
    await sql.unsafe(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)",
    );
    const rows = await sql`SELECT version FROM schema_migrations ORDER BY version`;
    const done = new Set<number>(rows.map((r: { version: unknown }) => num(r.version)));
    const current = Math.max(0, ...done);
    if (current > known) {
      throw new MigrationError(
        `the records database is at version ${current}, newer than this build knows (${known}): run a newer build`,
      );
    }
    const applied: number[] = [];
    for (const m of migrations) {
      if (m.version > target || done.has(m.version)) continue;
      const apply = async (q: Sql) => {
        for (const statement of typeof m.up === "function" ? m.up(db.dialect) : m.up) await q.unsafe(statement);
        await q`INSERT INTO schema_migrations (version, name, applied_ms) VALUES (${m.version}, ${m.name}, ${o.nowMs ?? Date.now()})`;
      };
      // SQLite runs inside the lock's own write transaction; PostgreSQL, one transaction each.
      if (db.dialect === "postgres") await sql.begin((tx) => apply(tx as unknown as Sql));
      else await apply(sql);
      applied.push(m.version);
    }
    return { applied, version: Math.max(current, ...applied) };
  });
}
