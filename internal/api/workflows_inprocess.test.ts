// A workflow's wait on a clock the test moves: three days pass in a moment. The wait is a due
// time in the records, so the email is queued when the clock passes it and not before, a change
// with triggerWorkflows false starts nothing, and a retried identical upsert starts one run.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import { type InProcess, startInProcess } from "../testkit/inprocess";
import { waitFor } from "../testkit/testkit";

const DAY = 86_400_000;
const clock = new ManualClock(Date.UTC(2026, 10, 2, 9));
const hot = new EmbeddedHot(null);
let svc: InProcess;
let token: string;

beforeAll(async () => {
  svc = await startInProcess(hot, clock, { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: DAY }, 60_000, {
    running: true,
  });
  await svc.clients.directory.createOrganization({ slug: "flows", plan: Plan.ENTERPRISE });
  await svc.clients.directory.addDomain({ slug: "flows", domain: "flows.example", verified: true });
  token = (await svc.clients.directory.createToken({ slug: "flows" })).token;
});
afterAll(async () => {
  await svc?.stop();
  await hot.lifecycle.close();
});

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${svc.apiUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}
const runsOf = async (id: string) =>
  (await api("GET", `/api/v1/workflows/${id}/runs`)).body.data as { step: number; state: string }[];
const queuedTo = async (email: string) =>
  (
    (await api("GET", `/api/v1/subscribers/${encodeURIComponent(email)}/events`)).body.data as { type: string }[]
  ).filter((e) => e.type === "email.queued");

test("a tag added with triggerWorkflows true queues the email when the moved clock passes a three-day wait, not before; false and a retried upsert start nothing more", async () => {
  const wf = (
    await api("POST", "/api/v1/workflows", {
      name: "nudge",
      trigger: { type: "tag.added", tag: "trial" },
      steps: [
        { type: "wait", seconds: 3 * 86_400 },
        {
          type: "email",
          from: "Team <team@flows.example>",
          subject: "Three days in",
          text: "Hello {{subscriber.name}}",
        },
      ],
      active: true,
    })
  ).body;
  const upsert = { email: "dee@example.org", name: "Dee", tags: ["trial"] };
  expect((await api("POST", "/api/v1/subscribers", upsert)).status).toBe(201);
  expect((await api("POST", "/api/v1/subscribers", upsert)).status).toBe(200); // retried: unchanged
  expect(
    (await api("POST", "/api/v1/subscribers", { email: "eve@example.org", tags: ["trial"], triggerWorkflows: false }))
      .status,
  ).toBe(201);
  await waitFor("the run to wait", async () => (await runsOf(wf.id))[0]?.step === 1);

  // Two days and 23 hours: still waiting, however long the runner looks.
  clock.advance(3 * DAY - 3_600_000);
  await Bun.sleep(1_000);
  expect(await runsOf(wf.id)).toMatchObject([{ step: 1, state: "active", nextAt: "2026-11-05T09:00:00.000Z" }]);
  expect(await queuedTo("dee@example.org")).toHaveLength(0);

  // Past the three days: the email is queued, once, and the run completes.
  clock.advance(3_600_000);
  await waitFor("the run to complete", async () => (await runsOf(wf.id))[0]?.state === "completed");
  await waitFor("the email's queued event", async () => (await queuedTo("dee@example.org")).length === 1);
  expect(await runsOf(wf.id)).toHaveLength(1);
  expect(await queuedTo("eve@example.org")).toHaveLength(0);
}, 30_000);
