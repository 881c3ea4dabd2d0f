import { create } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  AutomationService,
  type Campaign as CampaignMsg,
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
import { guard, pageCursor } from "./service";

// The automation RPCs over the records: campaigns (their fan-out is campaign_fanout.ts), the
// one-click unsubscribe of their messages, and workflows (their runs: workflow_runner.ts). The
// API front has validated every request.

export interface AutomationDeps {
  records: Records;
  clock: Clock;
  /** A campaign was sent or scheduled: the fan-out has work. */
  onCampaignSent?: () => void;
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

export function automationRoutes(deps: AutomationDeps) {
  const { records, clock, onCampaignSent = () => {} } = deps;
  return (router: ConnectRouter) => {
    router.service(AutomationService, {
      async createCampaign(req) {
        if (!req.orgId || !req.name || !req.fromAddress.includes("@") || !req.subject || (!req.html && !req.text)) {
          throw new ConnectError(
            "org_id, name, from_address, subject and html or text are required",
            Code.InvalidArgument,
          );
        }
        const c = await guard(() => records.campaigns.create(req.orgId, req, clock.nowMs()));
        return { campaign: toCampaignMsg(c) };
      },

      async getCampaign(req) {
        const c = await guard(() => records.campaigns.get(req.orgId, req.id));
        if (!c) throw notFound(req.id);
        return { campaign: toCampaignMsg(c) };
      },

      async listCampaigns(req) {
        const page = await guard(() => records.campaigns.list(req.orgId, limitOf(req.limit), pageCursor(req.cursor)));
        return { campaigns: page.data.map(toCampaignMsg), nextCursor: page.nextCursor ?? "" };
      },

      async sendCampaign(req) {
        const scheduled = req.scheduledAtMs > 0n ? Number(req.scheduledAtMs) : undefined;
        const c = await guard(() => records.campaigns.send(req.orgId, req.id, scheduled, clock.nowMs()));
        if (c === undefined) throw notFound(req.id);
        if (c === "not_draft")
          throw new ConnectError(
            `campaign ${req.id} is not a draft: it was sent or cancelled before`,
            Code.FailedPrecondition,
          );
        onCampaignSent();
        return { campaign: toCampaignMsg(c) };
      },

      async cancelCampaign(req) {
        const c = await guard(() => records.campaigns.cancel(req.orgId, req.id, clock.nowMs()));
        if (c === undefined) throw notFound(req.id);
        if (c === "finished") throw new ConnectError(`campaign ${req.id} has finished`, Code.FailedPrecondition);
        return { campaign: toCampaignMsg(c) };
      },

      async unsubscribe(req) {
        const owner = await guard(() => records.campaigns.tokenOwner(req.token));
        // The subscriber may have been deleted since: the link names nobody any more.
        const changed =
          owner &&
          (await guard(() =>
            records.audience.update(
              owner.orgId,
              owner.subscriberId,
              { status: "unsubscribed", triggerWorkflows: true },
              clock.nowMs(),
            ),
          ));
        if (!changed) throw new ConnectError("this unsubscribe link names nobody", Code.NotFound);
        return { email: changed.subscriber.email };
      },

      async createWorkflow(req) {
        const w = req.workflow;
        if (!req.orgId || !w?.name)
          throw new ConnectError("org_id and workflow.name are required", Code.InvalidArgument);
        const input = {
          name: w.name,
          trigger: toTrigger(w.triggerType, w.triggerTag),
          steps: toSteps(w.stepsJson),
          active: w.active,
        };
        // Returned this once: the records keep it for signing, and no read gives it back.
        const secret = newWebhookSecret();
        const made = await guard(() => records.workflows.create(req.orgId, input, clock.nowMs(), secret));
        return { workflow: toWorkflowMsg(made), secret };
      },

      async getWorkflow(req) {
        const w = await guard(() => records.workflows.get(req.orgId, req.id));
        if (!w) throw workflowNotFound(req.id);
        return { workflow: toWorkflowMsg(w) };
      },

      async listWorkflows(req) {
        const page = await guard(() => records.workflows.list(req.orgId, limitOf(req.limit), pageCursor(req.cursor)));
        return { workflows: page.data.map(toWorkflowMsg), nextCursor: page.nextCursor ?? "" };
      },

      async updateWorkflow(req) {
        const current = await guard(() => records.workflows.get(req.orgId, req.id));
        if (!current) throw workflowNotFound(req.id);
        const trigger = req.triggerType === undefined ? undefined : toTrigger(req.triggerType, req.triggerTag ?? "");
        const change = {
          name: req.name,
          trigger,
          steps: req.stepsJson === undefined ? undefined : toSteps(req.stepsJson),
          active: req.active,
        };
        const defined = Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined));
        const w = await guard(() => records.workflows.update(req.orgId, req.id, defined, clock.nowMs()));
        if (!w) throw workflowNotFound(req.id);
        return { workflow: toWorkflowMsg(w) };
      },

      async deleteWorkflow(req) {
        if (!(await guard(() => records.workflows.delete(req.orgId, req.id)))) throw workflowNotFound(req.id);
        return {};
      },

      async rotateWorkflowSecret(req) {
        const secret = newWebhookSecret();
        if (!(await guard(() => records.workflows.rotateSecret(req.orgId, req.id, secret, clock.nowMs()))))
          throw workflowNotFound(req.id);
        return { secret };
      },

      async listWorkflowRuns(req) {
        const page = await guard(() =>
          records.workflows.runs(req.orgId, req.workflowId, limitOf(req.limit), pageCursor(req.cursor)),
        );
        if (!page) throw workflowNotFound(req.workflowId);
        return { runs: page.data.map(toRunMsg), nextCursor: page.nextCursor ?? "" };
      },
    });
  };
}
