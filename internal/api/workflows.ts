import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Workflow, WorkflowRun, WorkflowSchema } from "../gen/mailcore/limiter/v1/automation_pb";
import { parseMessageTemplate } from "./message_template";
import { InvalidField } from "./invalid_field";
import { type Admitted, json } from "./respond";
import { body, decoded, keyedCall, paging, route } from "./resource";
import { tagName } from "./subscribers";

// The workflow endpoints: create, list, read, change, delete, and a workflow's runs. Each
// validates here and makes one call to the daemon, which runs the runs.

const FIELDS = new Set(["name", "trigger", "steps", "active"]);
const MAX_NAME = 256;
const MAX_STEPS = 50;
const MAX_WAIT_S = 90 * 86_400;
const STEP_FIELDS: Record<string, string[]> = {
  wait: ["seconds"],
  email: ["from", "subject", "html", "text", "markdown"],
  add_tag: ["tag"],
  remove_tag: ["tag"],
  webhook: ["url"],
};

type WorkflowInit = MessageInitShape<typeof WorkflowSchema>;

const iso = (ms: bigint) => new Date(Number(ms)).toISOString();

function workflowJson(w: Workflow) {
  const steps = (JSON.parse(w.stepsJson) as Record<string, unknown>[]).map(({ fromAddress: _, ...step }) => step);
  return {
    id: w.id,
    name: w.name,
    trigger: w.triggerType === "tag.added" ? { type: w.triggerType, tag: w.triggerTag } : { type: w.triggerType },
    steps,
    active: w.active,
    createdAt: iso(w.createdAtMs),
    updatedAt: iso(w.updatedAtMs),
  };
}

function runJson(r: WorkflowRun) {
  return {
    id: r.id,
    subscriberId: r.subscriberId,
    step: r.step,
    state: r.state,
    nextAt: r.state === "active" ? iso(r.dueAtMs) : null,
    attempts: r.attempts,
    ...(r.detail ? { error: r.detail } : {}),
    createdAt: iso(r.createdAtMs),
    updatedAt: iso(r.updatedAtMs),
  };
}

function object(field: string, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new InvalidField(field, "must be a JSON object");
  return value as Record<string, unknown>;
}

function trigger(value: unknown): { triggerType: string; triggerTag: string } {
  const t = object("trigger", value);
  if (t.type === "subscriber.created" && t.tag === undefined) return { triggerType: t.type, triggerTag: "" };
  if (t.type === "tag.added") return { triggerType: t.type, triggerTag: tagName("trigger.tag", t.tag) };
  throw new InvalidField("trigger", 'must be {"type":"subscriber.created"} or {"type":"tag.added","tag":"..."}');
}

function step(value: unknown, i: number): Record<string, unknown> {
  const field = `steps[${i}]`;
  const s = object(field, value);
  const allowed = STEP_FIELDS[s.type as string];
  if (!allowed) throw new InvalidField(`${field}.type`, `must be one of ${Object.keys(STEP_FIELDS).join(", ")}`);
  const unknown = Object.keys(s).find((k) => k !== "type" && !allowed.includes(k));
  if (unknown !== undefined) throw new InvalidField(`${field}.${unknown}`, "is not a field of this step");
  switch (s.type) {
    case "wait":
      if (!Number.isInteger(s.seconds) || (s.seconds as number) < 1 || (s.seconds as number) > MAX_WAIT_S)
        throw new InvalidField(`${field}.seconds`, `must be a whole number from 1 to ${MAX_WAIT_S}`);
      return { type: "wait", seconds: s.seconds };
    case "email":
      try {
        return { type: "email", ...parseMessageTemplate(s) };
      } catch (err) {
        if (err instanceof InvalidField) throw new InvalidField(`${field}.${err.field}`, err.reason);
        throw err;
      }
    case "webhook": {
      let url: URL | undefined;
      try {
        url = new URL(String(s.url));
      } catch {}
      if (typeof s.url !== "string" || !url || (url.protocol !== "http:" && url.protocol !== "https:"))
        throw new InvalidField(`${field}.url`, "must be an http:// or https:// URL");
      return { type: "webhook", url: s.url };
    }
    default:
      return { type: s.type, tag: tagName(`${field}.tag`, s.tag) };
  }
}

function steps(value: unknown): string {
  if (!Array.isArray(value) || value.length > MAX_STEPS)
    throw new InvalidField("steps", `must be a list of at most ${MAX_STEPS} steps`);
  return JSON.stringify(value.map(step));
}

function name(value: unknown): string {
  if (typeof value !== "string" || value.trim() === "" || value.length > MAX_NAME)
    throw new InvalidField("name", `must be a string of 1 to ${MAX_NAME} characters`);
  return value.trim();
}

function active(value: unknown): boolean {
  if (typeof value !== "boolean") throw new InvalidField("active", "must be true or false");
  return value;
}

/** The body of POST /api/v1/workflows. Throws InvalidField. */
export function parseWorkflow(b: unknown): WorkflowInit {
  const o = object("body", b);
  const unknown = Object.keys(o).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");
  return {
    name: name(o.name),
    ...trigger(o.trigger),
    stepsJson: steps(o.steps),
    active: o.active === undefined ? false : active(o.active),
  };
}

/** The body of PATCH /api/v1/workflows/{id}: what is given changes. Throws InvalidField. */
export function parseWorkflowPatch(b: unknown) {
  const o = object("body", b);
  const unknown = Object.keys(o).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");
  return {
    ...(o.name === undefined ? {} : { name: name(o.name) }),
    ...(o.trigger === undefined ? {} : trigger(o.trigger)),
    ...(o.steps === undefined ? {} : { stepsJson: steps(o.steps) }),
    ...(o.active === undefined ? {} : { active: active(o.active) }),
  };
}

const workflowRef = (a: Admitted) => ({ id: decoded(a.params[0]!) });

/** GET /api/v1/workflows: a page. */
export const listWorkflows = route(async ({ ports, records }, { req, headers }) => {
  const res = await ports.automation.listWorkflows({ ...paging(new URL(req.url)) }, records);
  return json(200, { data: res.workflows.map(workflowJson), nextCursor: res.nextCursor || null }, headers);
});

/** POST /api/v1/workflows: with the secret of its webhook steps, this once (like a webhook endpoint's). */
export const createWorkflow = route(async (front, a) => {
  const { workflow, secret } = await front.ports.automation.createWorkflow(
    { workflow: parseWorkflow(await body(a)) },
    keyedCall(front, a),
  );
  return json(201, { ...workflowJson(workflow!), secret }, a.headers);
});

/** GET /api/v1/workflows/{id}. */
export const getWorkflow = route(async ({ ports, records }, a) =>
  json(200, workflowJson((await ports.automation.getWorkflow(workflowRef(a), records)).workflow!), a.headers),
);

/** PATCH /api/v1/workflows/{id}: what is given changes. */
export const updateWorkflow = route(async ({ ports, records }, a) =>
  json(
    200,
    workflowJson(
      (await ports.automation.updateWorkflow({ ...workflowRef(a), ...parseWorkflowPatch(await body(a)) }, records))
        .workflow!,
    ),
    a.headers,
  ),
);

/** DELETE /api/v1/workflows/{id}. */
export const deleteWorkflow = route(async ({ ports, records }, a) => {
  await ports.automation.deleteWorkflow(workflowRef(a), records);
  return new Response(null, { status: 204, headers: a.headers });
});

/** POST /api/v1/workflows/{id}/secret: a new secret for its webhook steps. */
export const rotateWorkflowSecret = route(async ({ ports, records }, a) => {
  const { secret } = await ports.automation.rotateWorkflowSecret(workflowRef(a), records);
  return json(200, { secret }, a.headers);
});

/** GET /api/v1/workflows/{id}/runs: a page of its runs. */
export const listWorkflowRuns = route(async ({ ports, records }, a) => {
  const { id } = workflowRef(a);
  const res = await ports.automation.listWorkflowRuns({ workflowId: id, ...paging(new URL(a.req.url)) }, records);
  return json(200, { data: res.runs.map(runJson), nextCursor: res.nextCursor || null }, a.headers);
});
