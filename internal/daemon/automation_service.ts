import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type AutomationService,
  type Campaign as CampaignMsg,
  type CancelCampaignRequest,
  type CreateCampaignRequest,
  type CreateWorkflowRequest,
  type DeleteWorkflowRequest,
  type GetCampaignRequest,
  type GetWorkflowRequest,
  type ListCampaignsRequest,
  type ListWorkflowRunsRequest,
  type ListWorkflowsRequest,
  type RotateWorkflowSecretRequest,
  type SendCampaignRequest,
  type UnsubscribeRequest,
  type UpdateWorkflowRequest,
  CampaignSchema,
  CampaignStatus,
  type Workflow as WorkflowMsg,
  type WorkflowRun as WorkflowRunMsg,
  WorkflowRunSchema,
  WorkflowSchema,
} from "../gen/mailcore/limiter/v1/automation_pb";
import type { Campaign, CampaignStatus as Status } from "../records/campaigns";
import type { Records } from "../records/records";
import type { Step, Trigger, TriggerType, Workflow, WorkflowRun } from "../records/workflows";
import { newWebhookSecret } from "../webhooks/signature";
import { guard, pageCursor } from "./rpc_errors";
import { tenantOf } from "./tenant";

// The automation RPCs over the records: campaigns (their fan-out is campaign_fanout.ts), the
// one-click unsubscribe of their messages, and workflows (their runs: workflow_runner.ts). The
// API front has validated every request.

export interface AutomationDeps {
  records: Pick<Records, "campaigns" | "audience" | "workflows">;
  clock: Clock;
  /** A campaign was sent or scheduled: the fan-out has work. */
  onCampaignSent: () => void;
}

const STATUS_MSG: Record<Status, CampaignStatus> = {
  draft: CampaignStatus.DRAFT,
  scheduled: CampaignStatus.SCHEDULED,
  sending: CampaignStatus.SENDING,
  sent: CampaignStatus.SENT,
  cancelled: CampaignStatus.CANCELLED,
  failed: CampaignStatus.FAILED,
};
const MAX_LIMIT = 100;

function toCampaignMsg(c: Campaign): CampaignMsg {
  const s = c.stats;
  return create(CampaignSchema, {
    id: c.id,
    name: c.name,
    from: c.from,
    fromAddress: c.fromAddress,
    subject: c.subject,
    html: c.html,
    text: c.text,
    audienceTags: c.audienceTags,
    status: STATUS_MSG[c.status],
    scheduledAtMs: BigInt(c.scheduledMs ?? 0),
    detail: c.detail,
    stats: {
      recipients: BigInt(s.recipients),
      queued: BigInt(s.queued),
      delivered: BigInt(s.delivered),
      bounced: BigInt(s.bounced),
      failed: BigInt(s.failed),
      skipped: BigInt(s.skipped),
      suppressed: BigInt(s.suppressed),
    },
    createdAtMs: BigInt(c.createdMs),
    updatedAtMs: BigInt(c.updatedMs),
  });
}

function toWorkflowMsg(w: Workflow): WorkflowMsg {
  return create(WorkflowSchema, {
    id: w.id,
    name: w.name,
    triggerType: w.trigger.type,
    triggerTag: w.trigger.tag ?? "",
    stepsJson: JSON.stringify(w.steps),
    active: w.active,
    createdAtMs: BigInt(w.createdMs),
    updatedAtMs: BigInt(w.updatedMs),
  });
}

function toRunMsg(r: WorkflowRun): WorkflowRunMsg {
  return create(WorkflowRunSchema, {
    id: r.id,
    subscriberId: r.subscriberId,
    step: r.step,
    state: r.state,
    dueAtMs: BigInt(r.dueMs),
    attempts: r.attempts,
    detail: r.detail,
    createdAtMs: BigInt(r.createdMs),
    updatedAtMs: BigInt(r.updatedMs),
  });
}

function toTrigger(type: string, tag: string): Trigger {
  if (type === "subscriber.created") return { type };
  if (type === "tag.added" && tag !== "") return { type: type as TriggerType, tag };
  throw new ConnectError(
    "trigger_type must be subscriber.created, or tag.added with a trigger_tag",
    Code.InvalidArgument,
  );
}

function toSteps(json: string): Step[] {
  try {
    const steps = JSON.parse(json) as unknown;
    if (Array.isArray(steps)) return steps as Step[];
  } catch {}
  throw new ConnectError("steps_json must be a JSON array of steps", Code.InvalidArgument);
}

const limitOf = (limit: number) => Math.min(MAX_LIMIT, Math.max(1, limit || 20));
const notFound = (id: string) => new ConnectError(`no campaign ${id} in this organization`, Code.NotFound);
const workflowNotFound = (id: string) => new ConnectError(`no workflow ${id} in this organization`, Code.NotFound);

/** AutomationService's methods, by name. */
export function automationHandlers(deps: AutomationDeps): ServiceImpl<typeof AutomationService> {
  return {
    createCampaign: (req, ctx) => createCampaign(deps, tenantOf(ctx.values), req),
    getCampaign: (req, ctx) => getCampaign(deps, tenantOf(ctx.values), req),
    listCampaigns: (req, ctx) => listCampaigns(deps, tenantOf(ctx.values), req),
    sendCampaign: (req, ctx) => sendCampaign(deps, tenantOf(ctx.values), req),
    cancelCampaign: (req, ctx) => cancelCampaign(deps, tenantOf(ctx.values), req),
    unsubscribe: (req) => unsubscribe(deps, req),
    createWorkflow: (req, ctx) => createWorkflow(deps, tenantOf(ctx.values), req),
    getWorkflow: (req, ctx) => getWorkflow(deps, tenantOf(ctx.values), req),
    listWorkflows: (req, ctx) => listWorkflows(deps, tenantOf(ctx.values), req),
    updateWorkflow: (req, ctx) => updateWorkflow(deps, tenantOf(ctx.values), req),
    deleteWorkflow: (req, ctx) => deleteWorkflow(deps, tenantOf(ctx.values), req),
    rotateWorkflowSecret: (req, ctx) => rotateWorkflowSecret(deps, tenantOf(ctx.values), req),
    listWorkflowRuns: (req, ctx) => listWorkflowRuns(deps, tenantOf(ctx.values), req),
  };
}

export async function createCampaign(deps: AutomationDeps, orgId: string, req: CreateCampaignRequest) {
  if (!req.name || !req.fromAddress.includes("@") || !req.subject || (!req.html && !req.text)) {
    throw new ConnectError("name, from_address, subject and html or text are required", Code.InvalidArgument);
  }
  const c = await guard(() => deps.records.campaigns.create(orgId, req, deps.clock.nowMs()));
  return { campaign: toCampaignMsg(c) };
}

export async function getCampaign(deps: AutomationDeps, orgId: string, req: GetCampaignRequest) {
  const c = await guard(() => deps.records.campaigns.get(orgId, req.id));
  if (!c) throw notFound(req.id);
  return { campaign: toCampaignMsg(c) };
}

export async function listCampaigns(deps: AutomationDeps, orgId: string, req: ListCampaignsRequest) {
  const page = await guard(() => deps.records.campaigns.list(orgId, limitOf(req.limit), pageCursor(req.cursor)));
  return { campaigns: page.data.map(toCampaignMsg), nextCursor: page.nextCursor ?? "" };
}

export async function sendCampaign(deps: AutomationDeps, orgId: string, req: SendCampaignRequest) {
  const scheduled = req.scheduledAtMs > 0n ? Number(req.scheduledAtMs) : undefined;
  const c = await guard(() => deps.records.campaigns.send(orgId, req.id, scheduled, deps.clock.nowMs()));
  if (c === undefined) throw notFound(req.id);
  if (c === "not_draft")
    throw new ConnectError(
      `campaign ${req.id} is not a draft: it was sent or cancelled before`,
      Code.FailedPrecondition,
    );
  deps.onCampaignSent();
  return { campaign: toCampaignMsg(c) };
}

export async function cancelCampaign(deps: AutomationDeps, orgId: string, req: CancelCampaignRequest) {
  const c = await guard(() => deps.records.campaigns.cancel(orgId, req.id, deps.clock.nowMs()));
  if (c === undefined) throw notFound(req.id);
  if (c === "finished") throw new ConnectError(`campaign ${req.id} has finished`, Code.FailedPrecondition);
  return { campaign: toCampaignMsg(c) };
}

export async function unsubscribe(deps: AutomationDeps, req: UnsubscribeRequest) {
  const owner = await guard(() => deps.records.campaigns.tokenOwner(req.token));
  // The subscriber may have been deleted since: the link names nobody any more.
  const changed =
    owner &&
    (await guard(() =>
      deps.records.audience.update(
        owner.orgId,
        owner.subscriberId,
        { status: "unsubscribed", triggerWorkflows: true },
        deps.clock.nowMs(),
      ),
    ));
  if (!changed) throw new ConnectError("this unsubscribe link names nobody", Code.NotFound);
  return { email: changed.subscriber.email };
}

export async function createWorkflow(deps: AutomationDeps, orgId: string, req: CreateWorkflowRequest) {
  const w = req.workflow;
  if (!w?.name) throw new ConnectError("workflow.name is required", Code.InvalidArgument);
  const input = {
    name: w.name,
    trigger: toTrigger(w.triggerType, w.triggerTag),
    steps: toSteps(w.stepsJson),
    active: w.active,
  };
  // Returned this once: the records keep it for signing, and no read gives it back.
  const secret = newWebhookSecret();
  const made = await guard(() => deps.records.workflows.create(orgId, input, deps.clock.nowMs(), secret));
  return { workflow: toWorkflowMsg(made), secret };
}

export async function getWorkflow(deps: AutomationDeps, orgId: string, req: GetWorkflowRequest) {
  const w = await guard(() => deps.records.workflows.get(orgId, req.id));
  if (!w) throw workflowNotFound(req.id);
  return { workflow: toWorkflowMsg(w) };
}

export async function listWorkflows(deps: AutomationDeps, orgId: string, req: ListWorkflowsRequest) {
  const page = await guard(() => deps.records.workflows.list(orgId, limitOf(req.limit), pageCursor(req.cursor)));
  return { workflows: page.data.map(toWorkflowMsg), nextCursor: page.nextCursor ?? "" };
}

export async function updateWorkflow(deps: AutomationDeps, orgId: string, req: UpdateWorkflowRequest) {
  const current = await guard(() => deps.records.workflows.get(orgId, req.id));
  if (!current) throw workflowNotFound(req.id);
  const trigger = req.triggerType === undefined ? undefined : toTrigger(req.triggerType, req.triggerTag ?? "");
  const change = {
    name: req.name,
    trigger,
    steps: req.stepsJson === undefined ? undefined : toSteps(req.stepsJson),
    active: req.active,
  };
  const defined = Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined));
  const w = await guard(() => deps.records.workflows.update(orgId, req.id, defined, deps.clock.nowMs()));
  if (!w) throw workflowNotFound(req.id);
  return { workflow: toWorkflowMsg(w) };
}

export async function deleteWorkflow(deps: AutomationDeps, orgId: string, req: DeleteWorkflowRequest) {
  if (!(await guard(() => deps.records.workflows.delete(orgId, req.id)))) throw workflowNotFound(req.id);
  return {};
}

export async function rotateWorkflowSecret(deps: AutomationDeps, orgId: string, req: RotateWorkflowSecretRequest) {
  const secret = newWebhookSecret();
  if (!(await guard(() => deps.records.workflows.rotateSecret(orgId, req.id, secret, deps.clock.nowMs()))))
    throw workflowNotFound(req.id);
  return { secret };
}

export async function listWorkflowRuns(deps: AutomationDeps, orgId: string, req: ListWorkflowRunsRequest) {
  const page = await guard(() =>
    deps.records.workflows.runs(orgId, req.workflowId, limitOf(req.limit), pageCursor(req.cursor)),
  );
  if (!page) throw workflowNotFound(req.workflowId);
  return { runs: page.data.map(toRunMsg), nextCursor: page.nextCursor ?? "" };
}
