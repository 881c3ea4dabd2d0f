// The workflow records, one suite on a SQLite file and on a PostgreSQL server this file starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import { webhookRetryPolicy } from "../webhooks/schedule";
import type { Records } from "./records";
import type { NewWorkflow } from "./workflows";

const databases = recordDatabases("workflows");

const T0 = Date.UTC(2026, 10, 1);
const onTag = (tag: string, over: Partial<NewWorkflow> = {}): NewWorkflow => ({
  name: `on ${tag}`,
  trigger: { type: "tag.added", tag },
  steps: [
    { type: "wait", seconds: 60 },
    { type: "add_tag", tag: "welcomed" },
  ],
  active: true,
  ...over,
});

for (const [name, fresh] of databases) {
  describe(`workflow records: ${name}`, () => {
    let r: Records;
    let org: string;
    let other: string;
    beforeAll(async () => {
      ({ r, org, other } = await recordsWithTwoOrgs(fresh, "wf", T0));
    });
    afterAll(async () => {
      await r?.close();
    });
    const runsOf = async (id: string) => (await r.workflows.runs(org, id, 100))!.data;
    const types = async (email: string) => (await r.audience.events(org, email, 100))!.data.map((e) => e.type);

    test("create, read, list newest first, update, delete; another organization's is nobody's", async () => {
      const a = await r.workflows.create(org, onTag("x", { name: "a" }), T0);
      const b = await r.workflows.create(
        org,
        { name: "b", trigger: { type: "subscriber.created" }, steps: [], active: false },
        T0 + 1,
      );
      expect(a.id).toMatch(/^wf_[0-9a-f]{24}$/);
      expect(a).toMatchObject({ trigger: { type: "tag.added", tag: "x" }, active: true });
      expect(b.trigger).toEqual({ type: "subscriber.created" });
      expect(await r.workflows.get(org, a.id)).toEqual(a);
      expect(await r.workflows.get(other, a.id)).toBeUndefined();
      const first = await r.workflows.list(org, 1);
      expect(first.data.map((w) => w.name)).toEqual(["b"]);
      expect((await r.workflows.list(org, 1, first.nextCursor!)).data.map((w) => w.name)).toEqual(["a"]);
      expect(await r.workflows.update(org, b.id, { name: "b2", active: true }, T0 + 2)).toMatchObject({
        name: "b2",
        active: true,
        steps: [],
      });
      expect(await r.workflows.update(other, b.id, { name: "no" }, T0 + 2)).toBeUndefined();
      expect(await r.workflows.delete(org, a.id)).toBe(true);
      expect(await r.workflows.delete(org, a.id)).toBe(false);
      expect(await r.workflows.delete(org, b.id)).toBe(true);
    });

    test("a tag added with triggerWorkflows starts one run (with workflow.started); the same change again, or one without the switch, starts none", async () => {
      const w = await r.workflows.create(org, onTag("trial"), T0);
      await r.workflows.create(org, onTag("trial", { active: false }), T0);
      await r.audience.upsert(org, { email: "ann@example.com", tags: ["trial"], triggerWorkflows: true }, T0 + 10);
      await r.audience.upsert(org, { email: "ann@example.com", tags: ["trial"], triggerWorkflows: true }, T0 + 20);
      await r.audience.upsert(org, { email: "bob@example.com", tags: ["trial"], triggerWorkflows: false }, T0 + 30);
      await r.audience.upsert(org, { email: "cy@example.com", tags: ["other"], triggerWorkflows: true }, T0 + 30);
      const runs = await runsOf(w.id);
      const ann = (await r.audience.get(org, "ann@example.com"))!;
      expect(runs).toEqual([
        {
          id: expect.stringMatching(/^run_/),
          workflowId: w.id,
          orgId: org,
          subscriberId: ann.id,
          step: 0,
          state: "active",
          dueMs: T0 + 10,
          attempts: 0,
          detail: "",
          createdMs: T0 + 10,
          updatedMs: T0 + 10,
        },
      ]);
      expect(await types("ann@example.com")).toContain("workflow.started");
      expect(await types("bob@example.com")).not.toContain("workflow.started");
      await r.workflows.delete(org, w.id);
    });

    test("a run steps once per step: due runs, the step as the key, retries, completion with workflow.completed", async () => {
      const w = await r.workflows.create(
        org,
        {
          name: "welcome",
          trigger: { type: "subscriber.created" },
          steps: [{ type: "wait", seconds: 60 }],
          active: true,
        },
        T0,
      );
      await r.audience.upsert(org, { email: "dee@example.com", triggerWorkflows: true }, T0 + 100);
      const [run] = await runsOf(w.id);
      expect((await r.workflows.dueRuns(T0 + 99, 10)).map((x) => x.id)).not.toContain(run!.id);
      expect((await r.workflows.dueRuns(T0 + 100, 10)).map((x) => x.id)).toContain(run!.id);
      expect(await r.workflows.stepDone(run!, T0 + 60_100, T0 + 100)).toBe(true);
      expect(await r.workflows.stepDone(run!, T0 + 60_100, T0 + 100)).toBe(false); // the step ran already
      const [waiting] = await runsOf(w.id);
      expect(waiting).toMatchObject({ step: 1, dueMs: T0 + 60_100 });
      expect((await r.workflows.dueRuns(T0 + 60_099, 10)).map((x) => x.id)).not.toContain(run!.id);
      await r.workflows.retry(waiting!, T0 + 61_000, "receiver said 500", T0 + 60_100);
      expect((await runsOf(w.id))[0]).toMatchObject({ attempts: 1, dueMs: T0 + 61_000, detail: "receiver said 500" });
      await r.workflows.finish(waiting!, "completed", "", T0 + 61_000);
      await r.workflows.finish(waiting!, "completed", "", T0 + 61_000);
      expect((await runsOf(w.id))[0]).toMatchObject({ state: "completed" });
      expect((await types("dee@example.com")).filter((t) => t === "workflow.completed")).toHaveLength(1);
      expect((await r.workflows.dueRuns(T0 + 999_999, 100)).map((x) => x.id)).not.toContain(run!.id);
    });

    test("a webhook step: one delivery to the step's URL with the workflow's secret (rotated), none of the organization's webhooks; its end wakes the run", async () => {
      const url = "https://hooks.example/step";
      const policy = webhookRetryPolicy(1, () => 0.5);
      const w = await r.workflows.create(
        org,
        { name: "hook", trigger: { type: "tag.added", tag: "hook" }, steps: [{ type: "webhook", url }], active: true },
        T0,
        "whsec_first",
      );
      await r.audience.upsert(org, { email: "hook@example.com", tags: ["hook"], triggerWorkflows: true }, T0);
      const [run] = await runsOf(w.id);
      expect(await r.workflows.webhookStep(run!, url, '{"n":1}', T0)).toEqual({ state: "pending" });
      expect(await r.workflows.webhookStep(run!, url, '{"n":2}', T0 + 1)).toEqual({ state: "pending" }); // made once
      expect((await runsOf(w.id))[0]).toMatchObject({ step: 0, dueMs: T0 + 60_001, attempts: 0 });

      expect(await r.workflows.rotateSecret(org, w.id, "whsec_second", T0 + 2)).toBe(true);
      expect(await r.workflows.rotateSecret(other, w.id, "whsec_other", T0 + 2)).toBe(false);
      const [first, ...more] = await r.webhookDeliveries.claim(T0 + 3, 10, 30_000);
      expect(more).toEqual([]);
      expect(first).toMatchObject({
        id: `whd_${run!.id}_0`,
        url,
        secret: "whsec_second",
        payload: '{"n":1}',
        attempt: 1,
      });
      expect((await r.webhookEndpoints.list(org, 100)).data).toEqual([]);
      expect(await r.webhookEndpoints.delete(org, first!.endpointId)).toBe(false);

      const answer = { deliveryId: first!.id, durationMs: 5, error: "" };
      expect(
        await r.webhookDeliveries.report(
          [{ ...answer, leaseToken: first!.leaseToken, atMs: T0 + 4, statusCode: 500 }],
          policy,
        ),
      ).toEqual(["retrying"]);
      expect(await r.workflows.webhookStep(run!, url, "", T0 + 5)).toEqual({ state: "pending" });
      expect((await runsOf(w.id))[0]).toMatchObject({
        attempts: 1,
        detail: "webhook: HTTP 500, attempt 1",
        dueMs: T0 + 5_004 + 60_000,
      });
      const [second] = await r.webhookDeliveries.claim(T0 + 5_004, 10, 30_000);
      expect(second).toMatchObject({ id: first!.id, attempt: 2 });
      expect(
        await r.webhookDeliveries.report(
          [{ ...answer, leaseToken: second!.leaseToken, atMs: T0 + 5_010, statusCode: 204 }],
          policy,
        ),
      ).toEqual(["delivered"]);
      expect((await runsOf(w.id))[0]!.dueMs).toBe(T0 + 5_010); // woken
      expect(await r.workflows.webhookStep(run!, url, "", T0 + 5_011)).toEqual({ state: "delivered" });
    });

    test("a webhook step that fails for good fails its run's step; a workflow made without a secret gets one; deleting the workflow deletes its deliveries", async () => {
      const url = "https://down.example/";
      const w = await r.workflows.create(
        org,
        { name: "down", trigger: { type: "tag.added", tag: "down" }, steps: [{ type: "webhook", url }], active: true },
        T0,
      );
      await r.audience.upsert(org, { email: "down@example.com", tags: ["down"], triggerWorkflows: true }, T0);
      const [run] = await runsOf(w.id);
      await r.workflows.webhookStep(run!, url, "{}", T0);
      const [d] = await r.webhookDeliveries.claim(T0, 10, 30_000);
      expect(d!.secret).toMatch(/^whsec_/);
      const giveUp = { retryDelayMs: () => undefined, disableAfterMs: 1 };
      const rep = { deliveryId: d!.id, leaseToken: d!.leaseToken, atMs: T0 + 1, durationMs: 1, error: "" };
      expect(await r.webhookDeliveries.report([{ ...rep, statusCode: 503 }], giveUp)).toEqual(["failed"]);
      expect(await r.workflows.webhookStep(run!, url, "{}", T0 + 2)).toEqual({
        state: "failed",
        detail: "webhook https://down.example/: HTTP 503 (attempts: 1)",
      });

      await r.audience.upsert(org, { email: "down2@example.com", tags: ["down"], triggerWorkflows: true }, T0 + 3);
      const pending = (await runsOf(w.id)).find((x) => x.id !== run!.id)!;
      await r.workflows.webhookStep(pending, url, "{}", T0 + 3);
      expect(await r.workflows.delete(org, w.id)).toBe(true);
      expect(await r.webhookDeliveries.claim(T0 + 4, 10, 30_000)).toEqual([]);
    });
  });
}
