import { type EventRow, eventRow } from "./audience_types";
import { chunks, type Db, num, type Sql, timeOrderedId } from "./db";
import { BY_SEQ, mapPage, newestFirst, type Page } from "./paging";
import { setWorkflowSecret, stepDelivery } from "./step_deliveries";
import { DeliveryState } from "./webhook_deliveries";

// Workflows: steps run for a subscriber when a trigger happens to it (it is created, or a tag
// is added), once per run. A run is a row: the step it is at, when that step is due (a wait is
// a due time, not a timer), its state. Runs start in the transaction of the audience change
// that triggers them (startWorkflowRuns), so a change retried, which records nothing, starts
// nothing, and a change made with triggerWorkflows false starts nothing. A webhook step is a
// webhook delivery (step_deliveries.ts) signed with the workflow's secret; its run waits for it.

export type TriggerType = "subscriber.created" | "tag.added";

export interface Trigger {
  type: TriggerType;
  /** The tag of tag.added. */
  tag?: string;
}

export type Step =
  | { type: "wait"; seconds: number }
  | { type: "email"; from: string; fromAddress: string; subject: string; html: string; text: string }
  | { type: "add_tag"; tag: string }
  | { type: "remove_tag"; tag: string }
  | { type: "webhook"; url: string };

export interface Workflow {
  id: string;
  orgId: string;
  name: string;
  trigger: Trigger;
  steps: Step[];
  active: boolean;
  createdMs: number;
  updatedMs: number;
}

export type NewWorkflow = Pick<Workflow, "name" | "trigger" | "steps" | "active">;

export type RunState = "active" | "completed" | "failed";

/** What a run's webhook step came to so far: delivered, failed for good (why), or under way. */
export type WebhookStepState = { state: "delivered" } | { state: "failed"; detail: string } | { state: "pending" };

/**
 * A run waiting for its step's delivery is woken by the report that ends it; in case that
 * wake-up was missed, it looks again this long after the delivery's next attempt is due (an
 * attempt's lease ends before then).
 */
const STEP_RECHECK_MS = 60_000;

export interface WorkflowRun {
  id: string;
  workflowId: string;
  orgId: string;
  subscriberId: string;
  /** The index of the next step to run; steps.length when every step ran. */
  step: number;
  state: RunState;
  /** When the next step may run. */
  dueMs: number;
  /** Tries of the current step that failed and are retried. */
  attempts: number;
  detail: string;
  createdMs: number;
  updatedMs: number;
}

interface WorkflowRow {
  seq: unknown;
  id: string;
  org_id: string;
  name: string;
  trigger_type: string;
  trigger_tag: string;
  steps: string;
  active: unknown;
  created_ms: unknown;
  updated_ms: unknown;
}

interface RunRow {
  seq: unknown;
  id: string;
  workflow_id: string;
  org_id: string;
  subscriber_id: string;
  step: unknown;
  state: string;
  due_ms: unknown;
  attempts: unknown;
  detail: string;
  created_ms: unknown;
  updated_ms: unknown;
}

function fromRow(r: WorkflowRow): Workflow {
  const type = r.trigger_type as TriggerType;
  return {
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    trigger: type === "tag.added" ? { type, tag: r.trigger_tag } : { type },
    steps: JSON.parse(r.steps) as Step[],
    active: num(r.active) === 1,
    createdMs: num(r.created_ms),
    updatedMs: num(r.updated_ms),
  };
}

function fromRunRow(r: RunRow): WorkflowRun {
  return {
    id: r.id,
    workflowId: r.workflow_id,
    orgId: r.org_id,
    subscriberId: r.subscriber_id,
    step: num(r.step),
    state: r.state as RunState,
    dueMs: num(r.due_ms),
    attempts: num(r.attempts),
    detail: r.detail,
    createdMs: num(r.created_ms),
    updatedMs: num(r.updated_ms),
  };
}

const TRIGGERS = new Set<string>(["subscriber.created", "tag.added"]);

/**
 * Starts the runs an audience change triggers, in its transaction: one per event that may
 * start workflows (recorded with triggerWorkflows true) and active workflow of the
 * organization whose trigger it matches, each with its workflow.started event.
 */
export async function startWorkflowRuns(sql: Sql, orgId: string, events: EventRow[], nowMs: number): Promise<void> {
  const triggering = events.filter((e) => e.trigger_workflows === 1 && TRIGGERS.has(e.type));
  if (triggering.length === 0) return;
  const workflows = ((await sql`SELECT * FROM workflows WHERE org_id = ${orgId} AND active = 1`) as WorkflowRow[]).map(
    fromRow,
  );
  if (workflows.length === 0) return;
  const runs: Record<string, unknown>[] = [];
  const started: EventRow[] = [];
  for (const e of triggering) {
    const tag = e.type === "tag.added" ? (JSON.parse(e.data) as { tag: string }).tag : undefined;
    for (const w of workflows) {
      if (w.trigger.type !== e.type || (tag !== undefined && w.trigger.tag !== tag)) continue;
      const id = timeOrderedId("run");
      runs.push({
        id,
        workflow_id: w.id,
        org_id: orgId,
        subscriber_id: e.subscriber_id,
        step: 0,
        state: "active",
        due_ms: nowMs,
        attempts: 0,
        detail: "",
        created_ms: nowMs,
        updated_ms: nowMs,
      });
      started.push(eventRow(e.subscriber_id, "workflow.started", nowMs, { workflowId: w.id, runId: id }, false));
    }
  }
  for (const part of chunks(runs)) await sql`INSERT INTO workflow_runs ${sql(part)}`;
  for (const part of chunks(started)) await sql`INSERT INTO subscriber_events ${sql(part)}`;
}

export class WorkflowRecords {
  constructor(private readonly db: Db) {}

  /** A new workflow; secret, when given, signs its webhook steps (else one is made at the first). */
  async create(orgId: string, input: NewWorkflow, nowMs: number, secret?: string): Promise<Workflow> {
    const id = timeOrderedId("wf");
    const [row] = (await this.db.tx(async (sql) => {
      if (secret !== undefined) await setWorkflowSecret(sql, { orgId, workflowId: id, secret, nowMs });
      return sql`INSERT INTO workflows ${sql({
        id,
        org_id: orgId,
        name: input.name,
        trigger_type: input.trigger.type,
        trigger_tag: input.trigger.tag ?? "",
        steps: JSON.stringify(input.steps),
        active: input.active ? 1 : 0,
        created_ms: nowMs,
        updated_ms: nowMs,
      })} RETURNING *`;
    })) as WorkflowRow[];
    return fromRow(row!);
  }

  /** Replaces the secret of the workflow's webhook steps; false when the organization has no such workflow. */
  rotateSecret(orgId: string, id: string, secret: string, nowMs: number): Promise<boolean> {
    return this.db.tx(async (sql) => {
      const [w] = await sql`SELECT id FROM workflows WHERE org_id = ${orgId} AND id = ${id}`;
      if (!w) return false;
      await setWorkflowSecret(sql, { orgId, workflowId: id, secret, nowMs });
      return true;
    });
  }

  async get(orgId: string, id: string): Promise<Workflow | undefined> {
    const [row] = (await this.db.run(
      (sql) => sql`SELECT * FROM workflows WHERE org_id = ${orgId} AND id = ${id}`,
    )) as WorkflowRow[];
    return row ? fromRow(row) : undefined;
  }

  /** Newest first. */
  list(orgId: string, limit: number, cursor?: string): Promise<Page<Workflow>> {
    return this.db.run(async (sql) => {
      const page = await newestFirst<WorkflowRow>(sql, sql`SELECT * FROM workflows WHERE org_id = ${orgId}`, BY_SEQ, {
        limit,
        cursor,
      });
      return mapPage(page, fromRow);
    });
  }

  /** Changes what is given; runs under way go on with the steps as they are then. */
  update(orgId: string, id: string, change: Partial<NewWorkflow>, nowMs: number): Promise<Workflow | undefined> {
    return this.db.tx(async (sql) => {
      const [row] =
        (await sql`UPDATE workflows SET updated_ms = ${nowMs} WHERE org_id = ${orgId} AND id = ${id} RETURNING *`) as WorkflowRow[];
      if (!row) return undefined;
      const next = { ...fromRow(row), ...change };
      const [done] =
        (await sql`UPDATE workflows SET name = ${next.name}, trigger_type = ${next.trigger.type}, trigger_tag = ${next.trigger.tag ?? ""},
          steps = ${JSON.stringify(next.steps)}, active = ${next.active ? 1 : 0} WHERE id = ${id} RETURNING *`) as WorkflowRow[];
      return fromRow(done!);
    });
  }

  /** Deletes a workflow, its runs (those under way stop) and its endpoint with its deliveries; false when there is none. */
  delete(orgId: string, id: string): Promise<boolean> {
    return this.db.tx(async (sql) => {
      const rows = await sql`DELETE FROM workflows WHERE org_id = ${orgId} AND id = ${id} RETURNING id`;
      if (rows.length === 0) return false;
      await sql`DELETE FROM workflow_runs WHERE workflow_id = ${id}`;
      await sql`DELETE FROM webhook_endpoints WHERE workflow_id = ${id}`;
      return true;
    });
  }

  /** The workflow's runs, newest first; undefined when there is no such workflow. */
  runs(orgId: string, workflowId: string, limit: number, cursor?: string): Promise<Page<WorkflowRun> | undefined> {
    return this.db.run(async (sql) => {
      const [w] = await sql`SELECT id FROM workflows WHERE org_id = ${orgId} AND id = ${workflowId}`;
      if (!w) return undefined;
      const page = await newestFirst<RunRow>(
        sql,
        sql`SELECT * FROM workflow_runs WHERE workflow_id = ${workflowId}`,
        BY_SEQ,
        { limit, cursor },
      );
      return mapPage(page, fromRunRow);
    });
  }

  /** Active runs whose next step is due, the earliest first. */
  async dueRuns(nowMs: number, limit: number): Promise<WorkflowRun[]> {
    const rows = (await this.db.run(
      (sql) =>
        sql`SELECT * FROM workflow_runs WHERE state = 'active' AND due_ms <= ${nowMs} ORDER BY due_ms LIMIT ${limit}`,
    )) as RunRow[];
    return rows.map(fromRunRow);
  }

  /**
   * Records that the run's current step ran: the run moves to step + 1, due at dueMs. The step
   * is the key: false when the run is no longer at that step (it ran elsewhere), so a step is
   * recorded once.
   */
  async stepDone(run: WorkflowRun, dueMs: number, nowMs: number): Promise<boolean> {
    const rows = await this.db.run(
      (
        sql,
      ) => sql`UPDATE workflow_runs SET step = ${run.step + 1}, due_ms = ${dueMs}, attempts = 0, detail = '', updated_ms = ${nowMs}
        WHERE id = ${run.id} AND step = ${run.step} AND state = 'active' RETURNING id`,
    );
    return rows.length === 1;
  }

  /**
   * The run's current webhook step: its delivery, made on the first call, and where it stands.
   * While it is under way the run waits: due again when the delivery's next attempt should
   * have ended (the report that ends the delivery wakes it sooner), its attempts and detail
   * those of the delivery.
   */
  webhookStep(run: WorkflowRun, url: string, payload: string, nowMs: number): Promise<WebhookStepState> {
    return this.db.tx(async (sql) => {
      // The run's row first: a report that ends the delivery meanwhile waits for this
      // transaction, so its wake-up comes after the wait written here, never before.
      const [held] =
        await sql`UPDATE workflow_runs SET updated_ms = ${nowMs} WHERE id = ${run.id} AND step = ${run.step} AND state = 'active' RETURNING id`;
      if (!held) return { state: "pending" }; // it moved on elsewhere
      const d = await stepDelivery(sql, { ...run, runId: run.id, url, payload, nowMs });
      const last = d.last && (d.last.statusCode === null ? d.last.error : `HTTP ${d.last.statusCode}`);
      if (d.state === DeliveryState.DELIVERED) return { state: "delivered" };
      if (d.state === DeliveryState.FAILED)
        return { state: "failed", detail: `webhook ${url}: ${last ?? "not delivered"} (attempts: ${d.attempts})` };
      const detail = last === undefined ? "" : `webhook: ${last}, attempt ${d.attempts}`;
      await sql`UPDATE workflow_runs SET due_ms = ${Math.max(d.dueMs, nowMs) + STEP_RECHECK_MS}, attempts = ${d.attempts}, detail = ${detail}
        WHERE id = ${run.id}`;
      return { state: "pending" };
    });
  }

  /** The current step failed for now: it is tried again at dueMs. */
  async retry(run: WorkflowRun, dueMs: number, detail: string, nowMs: number): Promise<void> {
    await this.db.run(
      (
        sql,
      ) => sql`UPDATE workflow_runs SET attempts = attempts + 1, due_ms = ${dueMs}, detail = ${detail}, updated_ms = ${nowMs}
        WHERE id = ${run.id} AND step = ${run.step} AND state = 'active'`,
    );
  }

  /** Ends the run; a completed run records workflow.completed on its subscriber. */
  finish(run: WorkflowRun, state: "completed" | "failed", detail: string, nowMs: number): Promise<void> {
    return this.db.tx(async (sql) => {
      const rows =
        await sql`UPDATE workflow_runs SET state = ${state}, detail = ${detail}, updated_ms = ${nowMs} WHERE id = ${run.id} AND step = ${run.step} AND state = 'active' RETURNING id`;
      if (rows.length === 1 && state === "completed") {
        await sql`INSERT INTO subscriber_events ${sql(eventRow(run.subscriberId, "workflow.completed", nowMs, { workflowId: run.workflowId, runId: run.id }, false))}`;
      }
    });
  }
}
