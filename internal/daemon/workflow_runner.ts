import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Subscriber } from "../records/audience_types";
import type { Step, Workflow, WorkflowRun } from "../records/workflows";
import { type AudienceSendParts, audienceEmail, newUnsubscribeToken, unverifiedDomain } from "./audience_email";
import { newMessageId } from "../mail/identity";
import { QUEUE_FULL_RETRY_MS } from "../mail/policy";
import { LeasedLoop } from "./leasedloop";

// The runner of workflow runs: every due run is taken a step at a time until it waits, fails
// for now, or ends. A step is recorded done by its key (the run and the step's index), so a
// step runs once per run; a crash between a step and its record runs it again, which the email
// step makes harmless with an idempotency key of the run and step. One daemon runs it at a
// time (a lease); the runs and their due times are in the records, so a restart resumes them.

const TICK_MS = 250;
/** The longest wait between two rounds while no run is due (a wait step may end this much late). */
const IDLE_MAX_MS = 5_000;
const DUE_BATCH = 50;

/** What running a step came to. */
type StepResult =
  | { kind: "done"; dueMs: number }
  | { kind: "retry"; dueMs: number; detail: string }
  | { kind: "fail"; detail: string }
  /** Under way elsewhere (a webhook delivery): the run's due time is already set. */
  | { kind: "wait" };

/**
 * The body of a webhook step: {"type":"workflow.step","timestamp":...,"data":{subscriber,workflowId,runId}},
 * the shape of the endpoints' events.
 */
function workflowStepPayload(subscriber: Subscriber, workflowId: string, runId: string, nowMs: number): string {
  return JSON.stringify({
    type: "workflow.step",
    timestamp: new Date(nowMs).toISOString(),
    data: { subscriber, workflowId, runId },
  });
}

export class WorkflowRunner extends LeasedLoop {
  constructor(private readonly o: AudienceSendParts) {
    super(o, { lease: "workflows", tickMs: TICK_MS, idleMaxMs: IDLE_MAX_MS, what: "workflow runs" });
  }

  /** One round: every due run (a batch), side by side. */
  protected async round(): Promise<boolean> {
    const due = await this.o.records.workflows.dueRuns(this.o.clock.nowMs(), DUE_BATCH);
    await Promise.all(due.map((r) => this.advance(r)));
    return due.length > 0;
  }

  /** Runs the run's steps from where it is until it waits, is retried later, or ends. */
  private async advance(start: WorkflowRun): Promise<void> {
    const { records, clock } = this.o;
    const workflow = await records.workflows.get(start.orgId, start.workflowId);
    if (!workflow) return; // deleted with its runs meanwhile
    let run = start;
    for (;;) {
      const now = clock.nowMs();
      if (run.step >= workflow.steps.length) return records.workflows.finish(run, "completed", "", now);
      const subscriber = await records.audience.get(run.orgId, run.subscriberId);
      if (!subscriber) return records.workflows.finish(run, "failed", "the subscriber was deleted", now);
      const result = await this.step(workflow.steps[run.step]!, run, workflow, subscriber);
      if (result.kind === "wait") return;
      if (result.kind === "fail") return records.workflows.finish(run, "failed", result.detail, clock.nowMs());
      if (result.kind === "retry") return records.workflows.retry(run, result.dueMs, result.detail, clock.nowMs());
      if (!(await records.workflows.stepDone(run, result.dueMs, clock.nowMs()))) return; // ran elsewhere
      run = { ...run, step: run.step + 1, dueMs: result.dueMs, attempts: 0 };
      if (result.dueMs > clock.nowMs()) return;
    }
  }

  private async step(step: Step, run: WorkflowRun, workflow: Workflow, subscriber: Subscriber): Promise<StepResult> {
    const { records, clock } = this.o;
    const now = clock.nowMs();
    switch (step.type) {
      case "wait":
        return { kind: "done", dueMs: now + step.seconds * 1_000 };
      case "add_tag":
      case "remove_tag": {
        // A workflow's own changes start no workflow (no cascades).
        const change = step.type === "add_tag" ? { tags: [step.tag] } : { removeTags: [step.tag] };
        await records.audience.update(run.orgId, run.subscriberId, { ...change, triggerWorkflows: false }, now);
        return { kind: "done", dueMs: now };
      }
      case "webhook": {
        // A delivery the workers make, signed and retried like an endpoint's; the run waits for its end.
        const payload = workflowStepPayload(subscriber, workflow.id, run.id, now);
        const res = await records.workflows.webhookStep(run, step.url, payload, now);
        if (res.state === "delivered") return { kind: "done", dueMs: clock.nowMs() };
        if (res.state === "failed") return { kind: "fail", detail: res.detail };
        return { kind: "wait" };
      }
      case "email":
        return this.email(step, run, subscriber);
    }
  }

  /** A transactional send with every guard; the id, token and idempotency key are the run's and the step's. */
  private async email(
    step: Extract<Step, { type: "email" }>,
    run: WorkflowRun,
    subscriber: Subscriber,
  ): Promise<StepResult> {
    const { records, clock } = this.o;
    // Someone who unsubscribed gets no more of an organization's automated mail.
    if (subscriber.status === "unsubscribed") return { kind: "done", dueMs: clock.nowMs() };
    const key = `${run.id}:${run.step}`;
    const reserved = (
      await records.campaigns.reserve({ id: key, orgId: run.orgId }, [
        { subscriberId: subscriber.id, messageId: newMessageId(), token: newUnsubscribeToken() },
      ])
    ).get(subscriber.id)!;
    const result = await this.o.accept({
      orgId: run.orgId,
      lane: Lane.TRANSACTIONAL,
      email: audienceEmail(step, subscriber, { publicUrl: this.o.publicUrl, token: reserved.token }, run.id),
      idempotencyKey: `workflow:${key}`,
      bodyHash: key,
      messageId: reserved.messageId,
    });
    switch (result.kind) {
      case "accepted":
      case "replayed":
        return { kind: "done", dueMs: clock.nowMs() };
      case "limited":
        return {
          kind: "retry",
          dueMs: clock.nowMs() + result.retryAfterMs,
          detail: `recipient rate limited (${result.reason})`,
        };
      case "domain_not_verified":
        return {
          kind: "fail",
          detail: unverifiedDomain(step.fromAddress),
        };
      case "queue_full":
        return {
          kind: "retry",
          dueMs: clock.nowMs() + QUEUE_FULL_RETRY_MS,
          detail: `the organization's queue is full (${result.reason})`,
        };
      case "suppressed":
        return { kind: "fail", detail: `the recipient is on the organization's suppression list (${result.reason})` };
      default:
        return { kind: "fail", detail: `the send was refused (${result.kind})` };
    }
  }
}
