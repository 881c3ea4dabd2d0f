import { newWebhookSecret } from "../webhooks/signature";
import { num, numOrNull, randomId, type Sql } from "./db";
import { DeliveryState } from "./webhook_deliveries";

// The deliveries of workflows' webhook steps: each a delivery of the webhook queue
// (webhook_deliveries.ts) to the step's URL, from the workflow's own endpoint row, whose secret
// signs it. Called inside the workflow records' transactions.

/** Sets the secret of a workflow's endpoint, making the endpoint if the workflow has none yet. */
export async function setWorkflowSecret(
  sql: Sql,
  o: { orgId: string; workflowId: string; secret: string; nowMs: number },
): Promise<void> {
  const [had] =
    await sql`UPDATE webhook_endpoints SET secret = ${o.secret} WHERE workflow_id = ${o.workflowId} RETURNING id`;
  if (had) return;
  await sql`INSERT INTO webhook_endpoints ${sql({
    id: randomId("wh"),
    org_id: o.orgId,
    url: "",
    events: "[]",
    secret: o.secret,
    created_ms: o.nowMs,
    workflow_id: o.workflowId,
  })}`;
}

/** Where a workflow step's delivery stands; the last attempt's status code (null: no answer) and error. */
export interface StepDelivery {
  state: DeliveryState;
  dueMs: number;
  attempts: number;
  last?: { statusCode: number | null; error: string };
}

/**
 * The delivery of one webhook step of a run, made (due now) on the first call: its id is the
 * run's and the step's, so a step is delivered once however often its run looks. A workflow
 * made before workflows had secrets gets its endpoint, with a new secret, here.
 */
export async function stepDelivery(
  sql: Sql,
  o: { orgId: string; workflowId: string; runId: string; step: number; url: string; payload: string; nowMs: number },
): Promise<StepDelivery> {
  const id = `whd_${o.runId}_${o.step}`;
  const [d] = await sql`SELECT state, due_ms, attempts FROM webhook_deliveries WHERE id = ${id}`;
  if (d) {
    const [last] =
      await sql`SELECT status_code, error FROM webhook_attempts WHERE delivery_id = ${id} ORDER BY attempt DESC LIMIT 1`;
    return {
      state: num(d.state) as DeliveryState,
      dueMs: num(d.due_ms),
      attempts: num(d.attempts),
      ...(last ? { last: { statusCode: numOrNull(last.status_code), error: last.error as string } } : {}),
    };
  }
  const find = () => sql`SELECT id FROM webhook_endpoints WHERE workflow_id = ${o.workflowId}`;
  let [endpoint] = await find();
  if (!endpoint) {
    await setWorkflowSecret(sql, {
      orgId: o.orgId,
      workflowId: o.workflowId,
      secret: newWebhookSecret(),
      nowMs: o.nowMs,
    });
    [endpoint] = await find();
  }
  await sql`INSERT INTO webhook_deliveries ${sql({
    id,
    endpoint_id: endpoint!.id,
    event_type: "workflow.step",
    payload: o.payload,
    state: DeliveryState.PENDING,
    attempts: 0,
    due_ms: o.nowMs,
    created_ms: o.nowMs,
    updated_ms: o.nowMs,
    url: o.url,
    run_id: o.runId,
  })}`;
  return { state: DeliveryState.PENDING, dueMs: o.nowMs, attempts: 0 };
}
