// Webhook deliveries on both databases, with time passed in (no sleeps): events fanned out by
// subscription (also from the message history's flush), the due queue's claims and leases, the
// retry schedule to the end, the endpoints' health and the 5-day disable, test events, retries
// and retention.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { emailWebhookEvents } from "../daemon/recordswriter";
import { recordDatabases } from "../testkit/recorddbs";
import { DISABLE_AFTER_MS, RETRY_SCHEDULE_MS, webhookRetryPolicy } from "../webhooks/schedule";
import type { MessageHistory } from "../model/history";
import { Records } from "./records";
import { type AttemptReport, DeliveryState, type WebhookEventInput } from "./webhook_deliveries";

const databases = recordDatabases("webhook-deliveries");

const T0 = Date.UTC(2026, 10, 1);
const LEASE = 30_000;
/** The schedule without jitter (random 0.5 is the middle of the spread). */
const policy = webhookRetryPolicy(1, () => 0.5);
const event = (orgId: string, type: string, atMs = T0): WebhookEventInput => ({ orgId, type, atMs, data: { n: 1 } });

for (const [name, fresh] of databases) {
  describe(`webhook delivery records: ${name}`, () => {
    let r: Records;
    let orgA: string;
    let orgB: string;
    beforeAll(async () => {
      const where = await fresh();
      r = await Records.open({ databaseUrl: where.url, sqliteFile: where.sqliteFile });
      orgA = (await r.directory.createOrganization("a", Plan.PREMIUM, T0)).id;
      orgB = (await r.directory.createOrganization("b", Plan.PREMIUM, T0)).id;
    });
    afterAll(async () => {
      await r?.close();
    });

    const report1 = async (rep: AttemptReport) => (await r.webhookDeliveries.report([rep], policy))[0]!;

    /** A fresh endpoint of org A and its one delivery, claimed. */
    async function claimedDelivery(url: string) {
      const ep = await r.webhookEndpoints.create({
        orgId: orgA,
        url,
        events: ["subscriber.created"],
        secret: "whsec_x",
        nowMs: T0,
      });
      await r.webhookDeliveries.enqueue(event(orgA, "subscriber.created"), T0);
      const claimed = (await r.webhookDeliveries.claim(T0, 100, LEASE)).filter((c) => c.url === url);
      expect(claimed).toHaveLength(1);
      return { ep, d: claimed[0]! };
    }

    test("subscriber changes are announced in their own transaction: created, updated, unsubscribed, deleted; an identical upsert announces nothing", async () => {
      const { id: org } = await r.directory.createOrganization("subs", Plan.PREMIUM, T0);
      const url = "https://subs.example/hook";
      const ep = await r.webhookEndpoints.create({
        orgId: org,
        url,
        events: ["subscriber.created", "subscriber.updated", "subscriber.unsubscribed", "subscriber.deleted"],
        secret: "whsec_s",
        nowMs: T0,
      });
      const upsert = (o: Record<string, unknown>) => ({ email: "Sam@Subs.example", triggerWorkflows: false, ...o });
      const made = await r.audience.upsert(org, upsert({ name: "Sam", tags: ["a"] }), T0);
      await r.audience.upsert(org, upsert({ name: "Sam", tags: ["a"] }), T0 + 1); // identical: nothing
      await r.audience.upsert(org, upsert({ tags: ["b"] }), T0 + 2);
      await r.audience.update(org, made.subscriber.id, { status: "unsubscribed", triggerWorkflows: true }, T0 + 3);
      await r.audience.delete(org, "sam@subs.example", T0 + 4);
      const sent = (await r.webhookDeliveries.claim(T0 + 5, 100, LEASE))
        .filter((c) => c.url === url)
        .map(
          (c) =>
            JSON.parse(c.payload) as {
              type: string;
              data: { id: string; email: string; tags?: string[]; status?: string };
            },
        );
      expect(sent.map((p) => p.type)).toEqual([
        "subscriber.created",
        "subscriber.updated",
        "subscriber.unsubscribed",
        "subscriber.deleted",
      ]);
      expect(sent.every((p) => p.data.id === made.subscriber.id && p.data.email === "sam@subs.example")).toBe(true);
      expect(sent[1]!.data.tags).toEqual(["a", "b"]);
      expect(sent[2]!.data.status).toBe("unsubscribed");
      expect((await r.webhookDeliveries.list(org, ep.id, 10))!.data).toHaveLength(4);
    });

    test("events go to the endpoints of their organization that subscribed to their type", async () => {
      const both = await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/both",
        events: ["email.bounced", "subscriber.created"],
        secret: "whsec_b",
        nowMs: T0,
      });
      const one = await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/one",
        events: ["email.bounced"],
        secret: "whsec_b",
        nowMs: T0,
      });
      expect(await r.webhookDeliveries.enqueue(event(orgB, "subscriber.created"), T0)).toBe(1);
      expect(await r.webhookDeliveries.enqueue(event(orgB, "email.bounced"), T0)).toBe(2);
      expect(await r.webhookDeliveries.enqueue(event(orgA, "email.bounced"), T0)).toBe(0);
      expect((await r.webhookDeliveries.list(orgB, both.id, 10))!.data.map((d) => d.eventType).sort()).toEqual([
        "email.bounced",
        "subscriber.created",
      ]);
      const [d] = (await r.webhookDeliveries.list(orgB, one.id, 10))!.data;
      expect(d).toMatchObject({
        eventType: "email.bounced",
        state: DeliveryState.PENDING,
        attempts: [],
        nextAttemptMs: T0,
        createdMs: T0,
      });
      const claimed = await r.webhookDeliveries.claim(T0, 100, LEASE);
      expect(claimed).toHaveLength(3);
      expect(JSON.parse(claimed.find((c) => c.id === d!.id)!.payload)).toEqual({
        type: "email.bounced",
        timestamp: new Date(T0).toISOString(),
        data: { n: 1 },
      });
      await r.webhookEndpoints.delete(orgB, both.id);
      await r.webhookEndpoints.delete(orgB, one.id);
    });

    test("the history flush announces each new message event once, queued only at acceptance", async () => {
      const ep = await r.webhookEndpoints.create({
        orgId: orgA,
        url: "https://a.example/mail",
        events: ["email.queued", "email.delivered", "email.deferred"],
        secret: "whsec_a",
        nowMs: T0,
      });
      const m: MessageHistory = {
        id: "msg_000000000000000000000001",
        orgId: orgA,
        lane: Lane.TRANSACTIONAL,
        from: "A <a@a.example>",
        to: "b@example.org",
        toMailbox: "b@example.org",
        subject: "Hi",
        tags: [],
        status: MessageStatus.QUEUED,
        attempts: 0,
        createdMs: T0,
        updatedMs: T0,
        version: 1,
        events: [{ status: MessageStatus.QUEUED, atMs: T0, detail: "accepted" }],
      };
      const flush = (msg: MessageHistory) =>
        r.history.write([msg], (sql, fresh) => r.webhookDeliveries.enqueueIn(sql, emailWebhookEvents(fresh), T0));
      await flush(m);
      await flush(m); // written again (a flush that lost its settle): nothing new
      const later = {
        ...m,
        status: MessageStatus.DELIVERED,
        version: 5,
        events: [
          ...m.events,
          { status: MessageStatus.QUEUED, atMs: T0 + 1, detail: "released" },
          { status: MessageStatus.SENDING, atMs: T0 + 2, detail: "leased" },
          { status: MessageStatus.DEFERRED, atMs: T0 + 3, detail: "451" },
          { status: MessageStatus.QUEUED, atMs: T0 + 4, detail: "retry" },
          { status: MessageStatus.DELIVERED, atMs: T0 + 5, detail: "250" },
        ],
      };
      await flush(later);
      const types = (await r.webhookDeliveries.list(orgA, ep.id, 10))!.data.map((d) => d.eventType).sort();
      expect(types).toEqual(["email.deferred", "email.delivered", "email.queued"]);
      await r.webhookEndpoints.delete(orgA, ep.id);
    });

    test("claims: due deliveries only, each to one claimer; an expired lease makes it due again and the old holder's report stale", async () => {
      const { ep, d } = await claimedDelivery("https://a.example/lease");
      expect(d.attempt).toBe(1);
      expect((await r.webhookDeliveries.claim(T0 + LEASE - 1, 100, LEASE)).some((c) => c.id === d.id)).toBe(false);
      const again = (await r.webhookDeliveries.claim(T0 + LEASE, 100, LEASE)).find((c) => c.id === d.id)!;
      expect(again.leaseToken).not.toBe(d.leaseToken);
      expect(again.attempt).toBe(1); // the first attempt never reported
      const stale = await report1({
        deliveryId: d.id,
        leaseToken: d.leaseToken,
        atMs: T0 + LEASE + 1,
        durationMs: 5,
        statusCode: 200,
        error: "",
      });
      expect(stale).toBe("stale");
      expect(
        await report1({
          deliveryId: d.id,
          leaseToken: again.leaseToken,
          atMs: T0 + LEASE + 2,
          durationMs: 5,
          statusCode: 200,
          error: "",
        }),
      ).toBe("delivered");
      expect(
        await report1({
          deliveryId: d.id,
          leaseToken: again.leaseToken,
          atMs: T0 + LEASE + 3,
          durationMs: 5,
          statusCode: 200,
          error: "",
        }),
      ).toBe("stale");
      await r.webhookEndpoints.delete(orgA, ep.id);
    });

    test("a batch of reports is recorded together, each with its own result", async () => {
      const ep = await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/batch",
        events: ["subscriber.deleted"],
        secret: "whsec_b",
        nowMs: T0,
      });
      for (let i = 0; i < 3; i++) await r.webhookDeliveries.enqueue(event(orgB, "subscriber.deleted"), T0);
      const [a, b, c] = (await r.webhookDeliveries.claim(T0, 100, LEASE)).filter(
        (x) => x.url === "https://b.example/batch",
      );
      const rep = (
        x: { id: string; leaseToken: string },
        statusCode: number,
        leaseToken = x.leaseToken,
      ): AttemptReport => ({ deliveryId: x.id, leaseToken, atMs: T0 + 1, durationMs: 2, statusCode, error: "" });
      expect(await r.webhookDeliveries.report([rep(a!, 200), rep(b!, 200, "lost"), rep(c!, 503)], policy)).toEqual([
        "delivered",
        "stale",
        "retrying",
      ]);
      const states = new Map(
        (await r.webhookDeliveries.list(orgB, ep.id, 10))!.data.map((d) => [d.id, [d.state, d.attempts.length]]),
      );
      expect([states.get(a!.id), states.get(b!.id), states.get(c!.id)]).toEqual([
        [DeliveryState.DELIVERED, 1],
        [DeliveryState.PENDING, 0],
        [DeliveryState.PENDING, 1],
      ]);
      await r.webhookEndpoints.delete(orgB, ep.id);
    });

    test("a claim takes at most perEndpoint of one endpoint, counting the caller's attempts under way, and fills up from the others", async () => {
      const hog = await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/hog",
        events: ["subscriber.unsubscribed"],
        secret: "whsec_b",
        nowMs: T0,
      });
      for (let i = 0; i < 20; i++) await r.webhookDeliveries.enqueue(event(orgB, "subscriber.unsubscribed", T0), T0); // older: first in line
      const other = await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/other",
        events: ["email.failed"],
        secret: "whsec_b",
        nowMs: T0,
      });
      for (let i = 0; i < 3; i++) await r.webhookDeliveries.enqueue(event(orgB, "email.failed", T0 + 1), T0 + 1);
      const first = await r.webhookDeliveries.claim(T0 + 1, 8, LEASE, { perEndpoint: 4 });
      expect(first.filter((c) => c.endpointId === hog.id)).toHaveLength(4);
      expect(first.filter((c) => c.endpointId === other.id)).toHaveLength(3);
      // The hog's 4 are under way at the caller: none more of it, however many are due.
      const second = await r.webhookDeliveries.claim(T0 + 1, 8, LEASE, {
        perEndpoint: 4,
        inFlight: new Map([[hog.id, 4]]),
      });
      expect(second).toEqual([]);
      const third = await r.webhookDeliveries.claim(T0 + 1, 8, LEASE, {
        perEndpoint: 4,
        inFlight: new Map([[hog.id, 1]]),
      });
      expect(third.map((c) => c.endpointId)).toEqual([hog.id, hog.id, hog.id]);
      await r.webhookEndpoints.delete(orgB, hog.id);
      await r.webhookEndpoints.delete(orgB, other.id);
    });

    test("a claim is shared by organization first: at most perOrg of one organization's endpoints, even behind its backlog the others' come", async () => {
      const orgC = (await r.directory.createOrganization("c", Plan.PREMIUM, T0)).id;
      const orgD = (await r.directory.createOrganization("d", Plan.PREMIUM, T0)).id;
      const endpoint = (orgId: string, i: number) =>
        r.webhookEndpoints.create({
          orgId,
          url: `https://${orgId}.example/${i}`,
          events: ["subscriber.deleted"],
          secret: "whsec_c",
          nowMs: T0,
        });
      // Four endpoints of C with 20 due deliveries each, all older than D's three.
      const cs = await Promise.all([0, 1, 2, 3].map((i) => endpoint(orgC, i)));
      const d = await endpoint(orgD, 0);
      try {
        for (let i = 0; i < 20; i++) await r.webhookDeliveries.enqueue(event(orgC, "subscriber.deleted", T0), T0);
        for (let i = 0; i < 3; i++)
          await r.webhookDeliveries.enqueue(event(orgD, "subscriber.deleted", T0 + 1), T0 + 1);
        const shares = { perEndpoint: 2, perOrg: 4 };
        // C's backlog fills the first window of the due queue; D's come all the same, up to D's endpoint's share.
        const first = await r.webhookDeliveries.claim(T0 + 1, 16, LEASE, shares);
        const ofC = first.filter((c) => cs.some((e) => e.id === c.endpointId));
        expect(ofC).toHaveLength(4);
        expect(first.filter((c) => c.endpointId === d.id)).toHaveLength(2);
        // C's four are under way at the caller: none more of C's 76, and D's next comes.
        const inFlight = new Map<string, number>();
        for (const c of ofC) inFlight.set(c.endpointId, (inFlight.get(c.endpointId) ?? 0) + 1);
        const second = await r.webhookDeliveries.claim(T0 + 1, 16, LEASE, { ...shares, inFlight });
        expect(second.map((c) => c.endpointId)).toEqual([d.id]);
        expect(await r.webhookDeliveries.claim(T0 + 1, 16, LEASE, { ...shares, inFlight })).toEqual([]);
      } finally {
        for (const e of [...cs, d]) await r.webhookEndpoints.delete(e.orgId, e.id);
      }
    });

    test("concurrent claims never hand out one delivery twice", async () => {
      const ep = await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/race",
        events: ["subscriber.updated"],
        secret: "whsec_b",
        nowMs: T0,
      });
      for (let i = 0; i < 40; i++) await r.webhookDeliveries.enqueue(event(orgB, "subscriber.updated"), T0);
      // Claimers that read the same candidates take each row once; the losers come back for more.
      const ids: string[] = [];
      for (let round = 0; round < 10 && ids.length < 40; round++) {
        const claims = await Promise.all(Array.from({ length: 8 }, () => r.webhookDeliveries.claim(T0, 10, LEASE)));
        ids.push(...claims.flat().map((c) => c.id));
      }
      expect(ids).toHaveLength(40);
      expect(new Set(ids).size).toBe(40);
      await r.webhookEndpoints.delete(orgB, ep.id);
    });

    test("failures follow the schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), then fail; the attempts are listed", async () => {
      const { ep, d } = await claimedDelivery("https://a.example/schedule");
      let now = T0;
      let lease = d;
      const results: string[] = [];
      for (let attempt = 1; attempt <= RETRY_SCHEDULE_MS.length + 1; attempt++) {
        const result = await report1({
          deliveryId: d.id,
          leaseToken: lease.leaseToken,
          atMs: now,
          durationMs: 3,
          statusCode: 500,
          error: "",
          responseExcerpt: `down\n\tfür Wartung ✉️ ${attempt}`,
        });
        results.push(result);
        if (result !== "retrying") break;
        const wait = RETRY_SCHEDULE_MS[attempt - 1]!;
        expect((await r.webhookDeliveries.claim(now + wait - 1, 100, LEASE)).some((c) => c.id === d.id)).toBe(false);
        now += wait;
        lease = (await r.webhookDeliveries.claim(now, 100, LEASE)).find((c) => c.id === d.id)!;
        expect(lease.attempt).toBe(attempt + 1);
      }
      expect(results).toEqual([...RETRY_SCHEDULE_MS.map(() => "retrying"), "failed"]);
      const [listed] = (await r.webhookDeliveries.list(orgA, ep.id, 10))!.data;
      expect(listed!.state).toBe(DeliveryState.FAILED);
      expect(listed!.nextAttemptMs).toBeNull();
      expect(listed!.attempts.map((a) => [a.attempt, a.statusCode, a.responseExcerpt])).toEqual(
        Array.from({ length: 8 }, (_, i) => [i + 1, 500, `down\n\tfür Wartung ✉️ ${i + 1}`]),
      );
      // 32.6 hours of failure: not yet the 5 days that disable an endpoint.
      expect((await r.webhookEndpoints.list(orgA, 100)).data.find((e) => e.id === ep.id)!.disabledMs).toBeNull();
      await r.webhookEndpoints.delete(orgA, ep.id);
    });

    test("an endpoint failing for 5 days is disabled, its pending deliveries failed, and it gets no new ones; a success in between resets the count", async () => {
      const { ep, d } = await claimedDelivery("https://a.example/down");
      await r.webhookDeliveries.enqueue(event(orgA, "subscriber.created", T0), T0); // a second, pending delivery
      const fail = async (at: number, lease: { id: string; leaseToken: string }, statusCode: number | null = null) =>
        report1({
          deliveryId: lease.id,
          leaseToken: lease.leaseToken,
          atMs: at,
          durationMs: 15_000,
          statusCode,
          error: statusCode ? "" : "no answer within 15 s",
        });
      expect(await fail(T0, d)).toBe("retrying");
      // The other delivery succeeds on day 1: the failing streak starts again from its next failure.
      const day1 = await r.webhookDeliveries.claim(T0 + 86_400_000, 100, LEASE);
      const other = day1.find((c) => c.url === "https://a.example/down" && c.id !== d.id)!;
      const retry = day1.find((c) => c.id === d.id)!;
      expect(await fail(T0 + 86_400_000, other, 200)).toBe("delivered");
      expect(await fail(T0 + 86_400_000 + 1, retry)).toBe("retrying");
      await r.webhookDeliveries.enqueue(event(orgA, "subscriber.created", T0 + 2 * 86_400_000), T0 + 2 * 86_400_000);
      const third = (await r.webhookDeliveries.claim(T0 + 2 * 86_400_000, 100, LEASE)).find(
        (c) => c.url === "https://a.example/down" && c.id !== d.id,
      )!;
      // The first failure after the success was at day 1 + 1 ms; 5 days later the endpoint goes.
      expect(await fail(T0 + 86_400_000 + DISABLE_AFTER_MS - 1 - 1, third)).toBe("retrying");
      const last = (await r.webhookDeliveries.claim(T0 + 86_400_000 + DISABLE_AFTER_MS + 1, 100, LEASE)).find(
        (c) => c.url === "https://a.example/down",
      )!;
      expect(await fail(T0 + 86_400_000 + DISABLE_AFTER_MS + 1, last)).toBe("disabled");
      const listed = (await r.webhookEndpoints.list(orgA, 100)).data.find((e) => e.id === ep.id)!;
      expect(listed.disabledMs).toBe(T0 + 86_400_000 + DISABLE_AFTER_MS + 1);
      expect(listed.disabledReason).toBe("every attempt failed for 5 days");
      const states = (await r.webhookDeliveries.list(orgA, ep.id, 10))!.data.map((x) => x.state);
      expect(states.filter((s) => s === DeliveryState.PENDING)).toEqual([]);
      expect(await r.webhookDeliveries.enqueue(event(orgA, "subscriber.created"), T0 + 6 * 86_400_000)).toBe(0);
      await r.webhookEndpoints.delete(orgA, ep.id);
    });

    test("health: the last success and failure and the failures in a row, across batches and within one", async () => {
      const { ep, d } = await claimedDelivery("https://a.example/health");
      const health = async () => {
        const e = (await r.webhookEndpoints.list(orgA, 100)).data.find((x) => x.id === ep.id)!;
        return [e.lastSuccessMs, e.lastFailureMs, e.consecutiveFailures];
      };
      const attempt = (lease: { id: string; leaseToken: string }, atMs: number, statusCode: number) => ({
        deliveryId: lease.id,
        leaseToken: lease.leaseToken,
        atMs,
        durationMs: 2,
        statusCode,
        error: "",
      });
      expect(await report1(attempt(d, T0 + 1, 500))).toBe("retrying");
      expect(await health()).toEqual([null, T0 + 1, 1]);
      // One batch: a failure, a success, two failures; then another batch adds to the streak.
      for (let i = 0; i < 4; i++) await r.webhookDeliveries.enqueue(event(orgA, "subscriber.created"), T0);
      const four = (await r.webhookDeliveries.claim(T0 + 2, 100, LEASE)).filter(
        (c) => c.url === "https://a.example/health",
      );
      expect(four).toHaveLength(4);
      await r.webhookDeliveries.report(
        four.map((c, i) => attempt(c, T0 + 10 + i, i === 1 ? 204 : 503)),
        policy,
      );
      expect(await health()).toEqual([T0 + 11, T0 + 13, 2]);
      const again = (await r.webhookDeliveries.claim(T0 + 60_000, 100, LEASE)).find((c) => c.id === four[0]!.id)!;
      await report1(attempt(again, T0 + 60_000, 502));
      expect(await health()).toEqual([T0 + 11, T0 + 60_000, 3]);
      await r.webhookEndpoints.delete(orgA, ep.id);
    });

    test("a test event goes out signed and retried like any; a finished delivery is retried as a new attempt", async () => {
      const ep = await r.webhookEndpoints.create({
        orgId: orgA,
        url: "https://a.example/test",
        events: ["email.bounced"],
        secret: "whsec_t",
        nowMs: T0,
      });
      expect(await r.webhookDeliveries.test(orgB, ep.id, T0)).toBeUndefined();
      const made = (await r.webhookDeliveries.test(orgA, ep.id, T0 + 5))!;
      expect(made).toMatchObject({ eventType: "webhook.test", state: DeliveryState.PENDING, nextAttemptMs: T0 + 5 });
      const [claim] = (await r.webhookDeliveries.claim(T0 + 5, 100, LEASE)).filter((c) => c.id === made.id);
      expect(JSON.parse(claim!.payload)).toEqual({
        type: "webhook.test",
        timestamp: new Date(T0 + 5).toISOString(),
        data: { webhookId: ep.id },
      });
      expect(claim!.secret).toBe("whsec_t");
      // Still pending: there is nothing to retry.
      expect(await r.webhookDeliveries.retry(orgA, ep.id, made.id, T0 + 6)).toBe("pending");
      await report1({
        deliveryId: made.id,
        leaseToken: claim!.leaseToken,
        atMs: T0 + 7,
        durationMs: 1,
        statusCode: 200,
        error: "",
      });
      expect(await r.webhookDeliveries.retry(orgB, ep.id, made.id, T0 + 8)).toBeUndefined();
      expect(await r.webhookDeliveries.retry(orgA, ep.id, "whd_nope", T0 + 8)).toBeUndefined();
      const retried = (await r.webhookDeliveries.retry(orgA, ep.id, made.id, T0 + 8))!;
      expect(retried).toMatchObject({ id: made.id, state: DeliveryState.PENDING, nextAttemptMs: T0 + 8 });
      expect(retried !== "pending" && retried.attempts.map((a) => a.statusCode)).toEqual([200]);
      const [second] = (await r.webhookDeliveries.claim(T0 + 8, 100, LEASE)).filter((c) => c.id === made.id);
      expect(second!.attempt).toBe(2);
      await report1({
        deliveryId: made.id,
        leaseToken: second!.leaseToken,
        atMs: T0 + 9,
        durationMs: 1,
        statusCode: 200,
        error: "",
      });
      const [listed] = (await r.webhookDeliveries.list(orgA, ep.id, 10))!.data;
      expect(listed!.attempts.map((a) => a.attempt)).toEqual([1, 2]);
      expect(listed!.state).toBe(DeliveryState.DELIVERED);
      await r.webhookEndpoints.delete(orgA, ep.id);
    });

    test("retention deletes finished deliveries with their attempts, never pending ones", async () => {
      const { ep, d } = await claimedDelivery("https://a.example/old");
      await report1({
        deliveryId: d.id,
        leaseToken: d.leaseToken,
        atMs: T0,
        durationMs: 1,
        statusCode: 200,
        error: "",
      });
      await r.webhookDeliveries.enqueue(event(orgA, "subscriber.created"), T0);
      expect(await r.webhookDeliveries.deleteFinishedBefore(T0 + 1, 100)).toBeGreaterThanOrEqual(1);
      const left = (await r.webhookDeliveries.list(orgA, ep.id, 10))!.data;
      expect(left.map((x) => x.state)).toEqual([DeliveryState.PENDING]);
      expect(await r.db.run((sql) => sql`SELECT * FROM webhook_attempts WHERE delivery_id = ${d.id}`)).toHaveLength(0);
      await r.webhookEndpoints.delete(orgA, ep.id);
    });
  });
}
