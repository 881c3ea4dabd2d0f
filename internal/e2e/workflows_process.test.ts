// Workflows end to end, through limiterd, an API process and a worker with the file sink: a
// tag added with triggerWorkflows true runs the steps (the email after the wait), false runs
// nothing, a retried identical upsert starts one run; a run survives kill -9 of the daemon
// during its wait and completes once. A webhook step is signed with the secret of the 201 and
// retried like an endpoint's deliveries (WEBHOOK_SCHEDULE_DIVISOR=10000: the whole schedule in
// about 10 s); one failing for good fails its run.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type Stack, startStack, waitFor } from "../testkit/testkit";

let stack: Stack;
let token: string;
interface Hook {
  path: string;
  body: any;
  raw: string;
  headers: Headers;
  at: number;
}
const hooks: Hook[] = [];
/** The receiver: /hook fails its first POST and takes the others, /down fails them all. */
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const path = new URL(req.url).pathname;
    const raw = await req.text();
    hooks.push({ path, body: JSON.parse(raw), raw, headers: req.headers, at: Date.now() });
    const first = hooks.filter((h) => h.path === path).length === 1;
    return new Response(null, { status: path === "/hook" && !first ? 200 : 500 });
  },
});
const hooksTo = (path: string) => hooks.filter((h) => h.path === path);

/** Whether the hook's signature verifies with secret, as a receiver checks it (Standard Webhooks). */
function signedWith(secret: string, h: Hook): boolean {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const id = h.headers.get("webhook-id");
  const timestamp = h.headers.get("webhook-timestamp");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${h.raw}`).digest("base64");
  return (h.headers.get("webhook-signature") ?? "").split(" ").includes(`v1,${expected}`);
}

beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: {
      PUBLIC_URL: "https://mail.example.test",
      WEBHOOK_ALLOW_PRIVATE_URLS: "1",
      WEBHOOK_SCHEDULE_DIVISOR: "10000",
    },
  });
  token = await stack.org("flows", "enterprise");
}, 30_000);
afterAll(async () => {
  receiver.stop(true);
  await stack?.stop();
});

type Json = Record<string, any>;

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: res.status === 204 ? {} : ((await res.json()) as Json) };
}

/** The .eml files the worker wrote to this address, with when each was written. */
function mailTo(address: string): { eml: string; mtimeMs: number }[] {
  const dir = join(stack.dataDir, "sink");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith(".eml"))
    .map((f) => ({ eml: readFileSync(join(dir, f), "utf8"), mtimeMs: Bun.file(join(dir, f)).lastModified }))
    .filter((m) => new RegExp(`^To: ${address.replace(/[.+]/g, "\\$&")}$`, "m").test(m.eml));
}

const runsOf = async (id: string) => (await api("GET", `/api/v1/workflows/${id}/runs`)).body.data as Json[];
const events = async (email: string) =>
  ((await api("GET", `/api/v1/subscribers/${email}/events?limit=100`)).body.data as Json[]).map((e) => e.type);

test("a workflow's endpoints: create, read, list, change, delete; its refusals", async () => {
  for (const [body, field] of [
    [{ name: "x", trigger: { type: "tag.removed", tag: "a" }, steps: [] }, "trigger.type"],
    [{ name: "x", trigger: { type: "tag.added" }, steps: [] }, "trigger.tag"],
    [{ name: "x", trigger: { type: "subscriber.created" }, steps: [{ type: "wait", seconds: 0 }] }, "steps[0].seconds"],
    [
      {
        name: "x",
        trigger: { type: "subscriber.created" },
        steps: [{ type: "email", from: "a@flows.example", subject: "s" }],
      },
      "steps[0].html",
    ],
    [
      { name: "x", trigger: { type: "subscriber.created" }, steps: [{ type: "webhook", url: "ftp://x" }] },
      "steps[0].url",
    ],
    [{ name: "x", trigger: { type: "subscriber.created" }, steps: [{ type: "sms" }] }, "steps[0].type"],
  ] as const) {
    const res = await api("POST", "/api/v1/workflows", body);
    expect({ status: res.status, field: res.body.field }).toEqual({ status: 422, field });
  }
  const made = await api("POST", "/api/v1/workflows", {
    name: "draft",
    trigger: { type: "subscriber.created" },
    steps: [{ type: "add_tag", tag: "new" }],
  });
  expect(made.status).toBe(201);
  const id = made.body.id as string;
  expect(made.body).toMatchObject({
    name: "draft",
    trigger: { type: "subscriber.created" },
    steps: [{ type: "add_tag", tag: "new" }],
    active: false,
  });
  expect((await api("GET", `/api/v1/workflows/${id}`)).body.name).toBe("draft");
  expect((await api("PATCH", `/api/v1/workflows/${id}`, { name: "renamed", active: true })).body).toMatchObject({
    name: "renamed",
    active: true,
  });
  expect((await api("GET", "/api/v1/workflows")).body.data.map((w: Json) => w.id)).toContain(id);
  expect((await api("DELETE", `/api/v1/workflows/${id}`)).status).toBe(204);
  expect((await api("GET", `/api/v1/workflows/${id}`)).status).toBe(404);
  expect((await api("GET", `/api/v1/workflows/${id}/runs`)).status).toBe(404);
}, 30_000);

test("a tag added with triggerWorkflows true sends the email after the wait, then tags and calls the webhook; false runs nothing; a retried identical upsert starts one run", async () => {
  const wf = (
    await api("POST", "/api/v1/workflows", {
      name: "trial",
      trigger: { type: "tag.added", tag: "trial" },
      steps: [
        { type: "wait", seconds: 2 },
        {
          type: "email",
          from: "Team <team@flows.example>",
          subject: "Welcome {{subscriber.name}}",
          markdown: "Your plan: {{subscriber.fields.plan}}. [Stop]({{unsubscribeUrl}})",
        },
        { type: "add_tag", tag: "welcomed" },
        { type: "webhook", url: `http://127.0.0.1:${receiver.port}/hook` },
      ],
      active: true,
    })
  ).body;
  const upsert = { email: "ann@example.org", name: "Ann", fields: { plan: "pro" }, tags: ["trial"] };
  const tagged = Date.now();
  expect((await api("POST", "/api/v1/subscribers", upsert)).status).toBe(201);
  expect((await api("POST", "/api/v1/subscribers", upsert)).status).toBe(200); // the retry: unchanged
  expect(
    (await api("POST", "/api/v1/subscribers", { email: "bob@example.org", tags: ["trial"], triggerWorkflows: false }))
      .status,
  ).toBe(201);

  // The receiver fails first: the step is retried, then the run completes.
  await waitFor("the webhook's first try", async () => hooksTo("/hook").length >= 1, 15_000);
  await waitFor("the run to complete", async () => (await runsOf(wf.id)).every((r) => r.state === "completed"), 20_000);
  const runs = await runsOf(wf.id);
  expect(runs).toHaveLength(1);
  expect(runs[0]).toMatchObject({ step: 4, state: "completed", nextAt: null });

  const mail = mailTo("ann@example.org");
  expect(mail).toHaveLength(1);
  expect(mail[0]!.mtimeMs - tagged).toBeGreaterThanOrEqual(2_000);
  expect(mail[0]!.eml).toMatch(/^Subject: Welcome Ann$/m);
  expect(mail[0]!.eml).toMatch(/^List-Unsubscribe: <https:\/\/mail\.example\.test\/u\/[A-Za-z0-9_-]{22}>$/m);
  expect(mail[0]!.eml).toContain("Your plan: pro.");
  expect((await api("GET", "/api/v1/subscribers/ann@example.org")).body.tags).toEqual(["trial", "welcomed"]);
  expect(hooksTo("/hook").at(-1)!.body).toMatchObject({
    type: "workflow.step",
    data: { workflowId: wf.id, runId: runs[0]!.id, subscriber: { email: "ann@example.org" } },
  });
  // Signed with the secret of the 201, which no read shows again; the retry has the same webhook-id.
  expect(wf.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
  expect((await api("GET", `/api/v1/workflows/${wf.id}`)).body.secret).toBeUndefined();
  const tries = hooksTo("/hook");
  expect(tries).toHaveLength(2);
  expect(tries.map((h) => signedWith(wf.secret, h))).toEqual([true, true]);
  expect(new Set(tries.map((h) => h.headers.get("webhook-id"))).size).toBe(1);
  expect(Math.abs(Number(tries[1]!.headers.get("webhook-timestamp")) - tries[1]!.at / 1_000)).toBeLessThan(5);
  const types = await events("ann@example.org");
  expect(types.filter((t) => t === "workflow.started")).toHaveLength(1);
  expect(types.filter((t) => t === "workflow.completed")).toHaveLength(1);

  expect(mailTo("bob@example.org")).toHaveLength(0);
  expect(await events("bob@example.org")).not.toContain("workflow.started");
}, 60_000);

test("kill -9 of limiterd during a run's wait: after the restart the run completes, and its email is sent once", async () => {
  const wf = (
    await api("POST", "/api/v1/workflows", {
      name: "survives",
      trigger: { type: "subscriber.created" },
      steps: [
        { type: "wait", seconds: 3 },
        { type: "email", from: "Team <team@flows.example>", subject: "Still here", text: "Hello {{subscriber.email}}" },
      ],
      active: true,
    })
  ).body;
  await api("POST", "/api/v1/subscribers", { email: "cy@example.org" });
  await waitFor("the run to wait", async () => (await runsOf(wf.id))[0]?.step === 1, 10_000);
  await stack.restartLimiterd();
  await waitFor(
    "the run to complete after the restart",
    async () => (await runsOf(wf.id))[0]?.state === "completed",
    30_000,
  );
  await waitFor("the email", async () => mailTo("cy@example.org").length > 0, 30_000);
  await Bun.sleep(1_000);
  expect(mailTo("cy@example.org")).toHaveLength(1);
  expect(await runsOf(wf.id)).toHaveLength(1);
}, 90_000);

test("an email step sends nothing to an unsubscribed subscriber; the run goes on", async () => {
  const wf = (
    await api("POST", "/api/v1/workflows", {
      name: "news",
      trigger: { type: "tag.added", tag: "news" },
      steps: [
        { type: "email", from: "Team <team@flows.example>", subject: "News", text: "Hi" },
        { type: "add_tag", tag: "done" },
      ],
      active: true,
    })
  ).body;
  await api("POST", "/api/v1/subscribers", { email: "gone@example.org", status: "unsubscribed", tags: ["news"] });
  await waitFor("the run to complete", async () => (await runsOf(wf.id))[0]?.state === "completed", 10_000);
  expect((await api("GET", "/api/v1/subscribers/gone@example.org")).body.tags).toEqual(["done", "news"]);
  await Bun.sleep(500);
  expect(mailTo("gone@example.org")).toHaveLength(0);
}, 30_000);

test("a webhook step failing for good: retried on the schedule, signed with the rotated secret after a rotation, then its run fails and the steps after it never run", async () => {
  const wf = (
    await api("POST", "/api/v1/workflows", {
      name: "down",
      trigger: { type: "tag.added", tag: "down" },
      steps: [
        { type: "webhook", url: `http://127.0.0.1:${receiver.port}/down` },
        { type: "add_tag", tag: "after" },
      ],
      active: true,
    })
  ).body;
  await api("POST", "/api/v1/subscribers", { email: "dan@example.org", tags: ["down"] });
  await waitFor("the first attempt", async () => hooksTo("/down").length >= 1, 15_000);
  const rotated = await api("POST", `/api/v1/workflows/${wf.id}/secret`);
  expect(rotated.status).toBe(200);
  expect(rotated.body.secret).toMatch(/^whsec_/);
  expect(rotated.body.secret).not.toBe(wf.secret);
  expect((await api("POST", "/api/v1/workflows/wf_none/secret")).status).toBe(404);

  await waitFor("the run to fail", async () => (await runsOf(wf.id))[0]?.state === "failed", 60_000);
  const tries = hooksTo("/down");
  expect(tries).toHaveLength(8); // the first attempt and the schedule's 7 retries
  expect(new Set(tries.map((h) => h.headers.get("webhook-id"))).size).toBe(1);
  expect(signedWith(wf.secret, tries[0]!)).toBe(true);
  expect(signedWith(rotated.body.secret, tries.at(-1)!)).toBe(true);
  expect(signedWith(wf.secret, tries.at(-1)!)).toBe(false);
  expect((await runsOf(wf.id))[0]).toMatchObject({
    step: 0,
    state: "failed",
    error: `webhook http://127.0.0.1:${receiver.port}/down: HTTP 500 (attempts: 8)`,
  });
  expect((await api("GET", "/api/v1/subscribers/dan@example.org")).body.tags).toEqual(["down"]);
}, 90_000);
