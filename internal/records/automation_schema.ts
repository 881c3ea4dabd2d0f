import { type Dialect, identityColumn } from "./db";

// The tables of migration 6 (released with it; a change is a new migration): campaigns with
// their progress over the audience; one row per campaign (or workflow run) message, which maps
// a message to its campaign (stats) and an unsubscribe token to its subscriber; workflows and
// their runs (the step a run is at and when it is due: a wait is a time here, not a timer).

export function automationTables(dialect: Dialect): string[] {
  const identity = identityColumn(dialect);
  return [
    `CREATE TABLE campaigns (
      seq ${identity},
      id TEXT NOT NULL UNIQUE,
      org_id TEXT NOT NULL REFERENCES organizations (id),
      name TEXT NOT NULL,
      from_header TEXT NOT NULL,
      from_address TEXT NOT NULL,
      subject TEXT NOT NULL,
      html TEXT NOT NULL,
      text_body TEXT NOT NULL,
      audience_tags TEXT NOT NULL,
      status TEXT NOT NULL,
      scheduled_ms BIGINT,
      detail TEXT NOT NULL,
      cursor_seq BIGINT NOT NULL,
      last_seq BIGINT NOT NULL,
      recipients BIGINT NOT NULL,
      queued BIGINT NOT NULL,
      delivered BIGINT NOT NULL,
      bounced BIGINT NOT NULL,
      failed BIGINT NOT NULL,
      skipped BIGINT NOT NULL,
      created_ms BIGINT NOT NULL,
      updated_ms BIGINT NOT NULL)`,
    "CREATE INDEX campaigns_org_seq ON campaigns (org_id, seq)",
    "CREATE INDEX campaigns_status ON campaigns (status, scheduled_ms)",
    `CREATE TABLE campaign_messages (
      campaign_id TEXT NOT NULL,
      subscriber_id TEXT NOT NULL,
      org_id TEXT NOT NULL,
      message_id TEXT NOT NULL UNIQUE,
      token TEXT NOT NULL UNIQUE,
      outcome TEXT NOT NULL,
      PRIMARY KEY (campaign_id, subscriber_id))`,
    `CREATE TABLE workflows (
      seq ${identity},
      id TEXT NOT NULL UNIQUE,
      org_id TEXT NOT NULL REFERENCES organizations (id),
      name TEXT NOT NULL,
      trigger_type TEXT NOT NULL,
      trigger_tag TEXT NOT NULL,
      steps TEXT NOT NULL,
      active SMALLINT NOT NULL,
      created_ms BIGINT NOT NULL,
      updated_ms BIGINT NOT NULL)`,
    "CREATE INDEX workflows_org_seq ON workflows (org_id, seq)",
    `CREATE TABLE workflow_runs (
      seq ${identity},
      id TEXT NOT NULL UNIQUE,
      workflow_id TEXT NOT NULL,
      org_id TEXT NOT NULL,
      subscriber_id TEXT NOT NULL,
      step INTEGER NOT NULL,
      state TEXT NOT NULL,
      due_ms BIGINT NOT NULL,
      attempts INTEGER NOT NULL,
      detail TEXT NOT NULL,
      created_ms BIGINT NOT NULL,
      updated_ms BIGINT NOT NULL)`,
    "CREATE INDEX workflow_runs_workflow ON workflow_runs (workflow_id, seq)",
    "CREATE INDEX workflow_runs_due ON workflow_runs (state, due_ms)",
  ];
}
