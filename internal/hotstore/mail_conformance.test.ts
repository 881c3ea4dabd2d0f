// The mail pipeline of the hot store (MailStore), run against every adapter (embedded, Redis,
// Redis Cluster) with a moved clock.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { DeliveryOutcome, Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import {
  hotStoreServers,
  hotStores,
  projectSuiteOrg,
  releaseNext,
  SUITE_POLICY as POLICY,
  suiteSends,
} from "../testkit/hotstores";
import type { HotStore } from "./hotstore";

const MIN = 60_000;
const HOUR = 60 * MIN;

let seq = 0;
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store sending: ${name}`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let org: string;

    beforeEach(async () => {
      if (store) await store.lifecycle.close();
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 5, 1) + ++seq * 100 * 24 * HOUR);
      org = `org_${name}_${seq}`;
      await project(org);
    });

    /** An organization as the daemon projects it, with the verified domain d.example. */
    const project = (id: string, version?: number, verifiedDomains?: string[]) =>
      projectSuiteOrg(store.admission, id, version, verifiedDomains);
    afterAll(async () => {
      await store?.lifecycle.close();
    });

    const sends = suiteSends(() => ({ mail: store.mail, clock, org, idPrefix: `msg_${name}_${seq}` }));
    const { send, drain } = sends;

    test("short window: 5 in any 10 minutes, the 6th refused with the exact wait", async () => {
      for (let i = 0; i < 5; i++) {
        expect((await send()).kind).toBe("accepted");
        clock.advance(MIN);
      }
      // Accepts at 0, 1, 2, 3, 4 minutes; now is 5 minutes: the first leaves at 10.
      expect(await send()).toEqual({ kind: "limited", reason: "short_window", retryAfterMs: 5 * MIN });
      clock.advance(5 * MIN - 1);
      expect(await send()).toMatchObject({ kind: "limited", retryAfterMs: 1 });
      clock.advance(1);
      expect((await send()).kind).toBe("accepted");
      // Nothing was recorded for the refusals: the next one waits for the 1-minute accept.
      expect(await send()).toEqual({ kind: "limited", reason: "short_window", retryAfterMs: MIN });
    });

    test("a call stamped before the accepts that filled the window waits the window, never more", async () => {
      // Calls are stamped by the daemon before they reach the store, so a refused one can run
      // after accepts stamped a few ms later than itself.
      for (let i = 0; i < 5; i++) expect((await send()).kind).toBe("accepted");
      clock.advance(-3);
      expect(await send()).toEqual({ kind: "limited", reason: "short_window", retryAfterMs: 10 * MIN });
    });

    test("accepts asked for at once (a batch of sends) are answered each as it would be alone, in order", async () => {
      const answers = await Promise.all([
        ...Array.from({ length: 7 }, () => send()),
        send({ mailbox: "other@example.com" }),
        send({ fromDomain: "unverified.example" }),
      ]);
      expect(answers.map((a) => a.kind)).toEqual([
        ...Array(5).fill("accepted"),
        "limited",
        "limited",
        "accepted",
        "domain_not_verified",
      ]);
      expect(new Set(answers.flatMap((a) => (a.kind === "accepted" ? [a.messageId] : []))).size).toBe(6);
    });

    test("windows are per organization and mailbox, and mailboxes are compared as given", async () => {
      for (let i = 0; i < 5; i++) await send();
      expect((await send()).kind).toBe("limited");
      expect((await send({ mailbox: "other@example.com" })).kind).toBe("accepted");
      const otherOrg = `${org}_b`;
      await project(otherOrg);
      expect((await send({ orgId: otherOrg })).kind).toBe("accepted");
    });

    test("long window: 20 in any 24 hours", async () => {
      for (let i = 0; i < 20; i++) {
        expect((await send()).kind).toBe("accepted");
        clock.advance(11 * MIN);
      }
      const refused = await send();
      // The first accept was 220 minutes ago; it leaves the 24-hour window after 24 h.
      expect(refused).toEqual({ kind: "limited", reason: "long_window", retryAfterMs: 24 * HOUR - 220 * MIN });
      clock.advance(24 * HOUR - 220 * MIN);
      expect((await send()).kind).toBe("accepted");
      expect((await send()).kind).toBe("limited");
    });

    test("bulk sends and fixtures are not counted", async () => {
      for (let i = 0; i < 30; i++) {
        expect((await send({ lane: Lane.BULK, checkCooldown: false, countGuards: false })).kind).toBe("accepted");
        expect((await send({ mailbox: "delivered@fixtures.test", countGuards: false })).kind).toBe("accepted");
      }
      for (let i = 0; i < 5; i++) expect((await send()).kind).toBe("accepted");
    });

    test("idempotency: same key and body replays, another body conflicts, a refusal records nothing", async () => {
      const key = { key: "k1", bodyHash: "h1", ttlMs: 24 * HOUR };
      const first = await send({ idempotency: key });
      expect(first.kind).toBe("accepted");
      expect(await send({ idempotency: key })).toEqual({
        kind: "replayed",
        messageId: (first as { messageId: string }).messageId,
      });
      expect(await send({ idempotency: { ...key, bodyHash: "h2" } })).toEqual({ kind: "conflict" });
      for (let i = 0; i < 4; i++) await send();
      const refused = await send({ idempotency: { ...key, key: "k2" } });
      expect(refused.kind).toBe("limited");
      clock.advance(10 * MIN);
      expect((await send({ idempotency: { ...key, key: "k2" } })).kind).toBe("accepted");
      // Keys expire.
      clock.advance(24 * HOUR);
      expect((await send({ idempotency: { ...key, bodyHash: "h3" } })).kind).toBe("accepted");
    });

    test("release is round-robin over organizations, oldest first within one", async () => {
      const others: [string, string] = [`${org}_x`, `${org}_y`];
      for (const o of others) await project(o);
      for (let i = 0; i < 6; i++) await send({ countGuards: false, mailbox: `a${i}@example.com` });
      await send({ orgId: others[0], countGuards: false });
      await send({ orgId: others[1], countGuards: false });
      await send({ orgId: others[1], countGuards: false });
      const order = await drain(Lane.TRANSACTIONAL);
      expect(order).toHaveLength(9);
      // Each organization waits at most one slot per other waiting organization.
      expect(order.slice(0, 3).sort()).toEqual([org, ...others].sort());
      expect(order.slice(3, 5).sort()).toEqual([org, others[1]].sort());
      expect(order.slice(5)).toEqual([org, org, org, org]);
      expect(await releaseNext(store.mail, Lane.BULK, clock.nowMs())).toBeNull();
    });

    /** Releases what a scheduler would at now, with the bulk lane's second of lead. */
    const releaseAhead = (lane: Lane, max = 100, leadMs = 1_000) =>
      store.mail.release(lane, clock.nowMs(), { ratePerSecond: 40, untilMs: clock.nowMs() + leadMs, max });
    const slots = (batch: { released: { slotMs: number }[] }) => batch.released.map((r) => r.slotMs);

    test("slots: a run starts at the first message, then exactly 40 in every 1000 ms, stamped up to the lead", async () => {
      for (let i = 0; i < 60; i++) await send({ lane: Lane.BULK, checkCooldown: false, countGuards: false });
      const t0 = clock.nowMs();
      const first = await releaseAhead(Lane.BULK);
      // Slots t0, t0 + 25, ..., t0 + 1000: 41 of them within the lead.
      expect(slots(first)).toEqual(Array.from({ length: 41 }, (_, k) => t0 + 25 * k));
      expect(first.nextSlotMs).toBe(t0 + 1_025);
      // Nothing more until the lead reaches the next slot; then the run goes on where it was.
      clock.advance(20);
      expect(await releaseAhead(Lane.BULK)).toEqual({ released: [], nextSlotMs: t0 + 1_025 });
      clock.advance(230);
      const next = await releaseAhead(Lane.BULK);
      expect(slots(next)).toEqual(Array.from({ length: 10 }, (_, k) => t0 + 1_025 + 25 * k));
      // max bounds a call; the rest comes at the next.
      clock.advance(300);
      expect(slots(await releaseAhead(Lane.BULK, 5))).toEqual([1275, 1300, 1325, 1350, 1375].map((d) => t0 + d));
      const last = await releaseAhead(Lane.BULK);
      expect(slots(last)).toEqual([1400, 1425, 1450, 1475].map((d) => t0 + d));
      expect(last.nextSlotMs).toBeNull(); // the lane is empty
      const leased = await store.mail.lease(100, clock.nowMs(), 30_000);
      expect(leased.map((l) => l.slotMs)).toEqual([
        ...slots(first),
        ...slots(next),
        ...Array.from({ length: 9 }, (_, k) => t0 + 1_275 + 25 * k),
      ]);
    });

    test("an organization held in the bulk lane: its queued messages wait, the others take every slot at the exact pace; let go, it goes on", async () => {
      const other = `${org}_x`;
      await project(other);
      const bulk = (orgId: string) => send({ orgId, lane: Lane.BULK, checkCooldown: false, countGuards: false });
      for (let i = 0; i < 3; i++) await bulk(org);
      for (let i = 0; i < 4; i++) await bulk(other);
      await send({ countGuards: false, mailbox: "t@example.com" });
      await store.mail.holdLane(org, Lane.BULK, true);
      await store.mail.holdLane(org, Lane.BULK, true);
      await bulk(org); // queued while held: held too
      expect(await store.mail.laneHolds(Lane.BULK)).toEqual([org]);
      expect(await store.mail.laneHolds(Lane.TRANSACTIONAL)).toEqual([]);
      const t0 = clock.nowMs();
      const first = await releaseAhead(Lane.BULK);
      // The other organization's 4, one slot after another, none left empty for the held one.
      expect(first.released.map((r) => [r.orgId, r.slotMs])).toEqual([0, 25, 50, 75].map((d) => [other, t0 + d]));
      expect(first.nextSlotMs).toBeNull();
      // Its transactional mail is not held; its bulk messages are still queued, not failed.
      expect((await releaseAhead(Lane.TRANSACTIONAL, 10, 50)).released.map((r) => r.orgId)).toEqual([org]);
      const counts = await store.mail.laneCounts(clock.nowMs());
      expect(counts.find((c) => c.lane === Lane.BULK)).toMatchObject({ depth: 4, ready: 4 });
      // Let go: its messages take the run's next slots (the slots not used stay counted, no burst).
      clock.advance(10);
      await store.mail.holdLane(org, Lane.BULK, false);
      expect(await store.mail.laneHolds(Lane.BULK)).toEqual([]);
      const after = await releaseAhead(Lane.BULK);
      expect(after.released.map((r) => [r.orgId, r.slotMs])).toEqual([100, 125, 150, 175].map((d) => [org, t0 + d]));
      const leased = await store.mail.lease(100, clock.nowMs(), 30_000);
      expect(leased.filter((l) => l.orgId === org && l.lane === Lane.BULK)).toHaveLength(4);
    });

    test("slots: a rate that does not divide 1000 still gives exactly that many in every 1000 ms of a run", async () => {
      for (let i = 0; i < 90; i++) await send({ lane: Lane.BULK, checkCooldown: false, countGuards: false });
      const t0 = clock.nowMs();
      const run = await store.mail.release(Lane.BULK, t0, { ratePerSecond: 30, untilMs: t0 + 3_000, max: 100 });
      const at = slots(run);
      expect(at).toHaveLength(90);
      for (let i = 30; i < at.length; i++) expect(at[i]! - at[i - 30]!).toBe(1_000);
      for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeOneOf([33, 34]);
    });

    test("slots: a lane that fell behind or went idle starts a new run at now; slots never lie in the past", async () => {
      for (let i = 0; i < 6; i++) await send({ lane: Lane.BULK, checkCooldown: false, countGuards: false });
      const t0 = clock.nowMs();
      expect(slots(await releaseAhead(Lane.BULK, 2, 50))).toEqual([t0, t0 + 25]);
      // The scheduler stalled: the run's next slot (t0 + 50) has passed.
      clock.advance(51);
      expect(slots(await releaseAhead(Lane.BULK, 2, 50))).toEqual([t0 + 51, t0 + 76]);
      // Idle a minute, the next message starts a run at once.
      clock.advance(60_000);
      expect(slots(await releaseAhead(Lane.BULK, 1, 50))).toEqual([clock.nowMs()]);
      // A wall clock stepped back an hour: the run's next slot lies an hour ahead, a run starts again now.
      clock.advance(-3_600_000);
      expect(slots(await releaseAhead(Lane.BULK, 1, 50))).toEqual([clock.nowMs()]);
    });

    test("slots: the lanes run apart; a rate that changed continues from the last slot", async () => {
      for (let i = 0; i < 3; i++) await send({ lane: Lane.BULK, checkCooldown: false, countGuards: false });
      for (let i = 0; i < 3; i++) await send({ countGuards: false, mailbox: `t${i}@example.com` });
      const t0 = clock.nowMs();
      expect(slots(await releaseAhead(Lane.BULK, 2))).toEqual([t0, t0 + 25]);
      expect(slots(await releaseAhead(Lane.TRANSACTIONAL, 3, 50))).toEqual([t0, t0 + 25, t0 + 50]);
      const slower = await store.mail.release(Lane.BULK, t0, { ratePerSecond: 10, untilMs: t0 + 1_000, max: 1 });
      expect(slots(slower)).toEqual([t0 + 125]);
    });

    test("lease, ack, retry with backoff, failure after the last attempt", async () => {
      const bulk = await send({ lane: Lane.BULK, checkCooldown: false, countGuards: false });
      const tx = await send();
      await drain(Lane.BULK);
      await drain(Lane.TRANSACTIONAL);
      const leased = await store.mail.lease(10, clock.nowMs(), 30_000);
      expect(leased.map((l) => [l.lane, l.attempt])).toEqual([
        [Lane.TRANSACTIONAL, 1],
        [Lane.BULK, 1],
      ]);
      expect(leased[0]!.payload).toBe(JSON.stringify({ n: sends.ids }));
      const [txLease, bulkLease] = leased as [(typeof leased)[0], (typeof leased)[0]];
      expect(txLease.messageId).toBe((tx as { messageId: string }).messageId);
      expect(bulkLease.messageId).toBe((bulk as { messageId: string }).messageId);
      expect(await store.mail.lease(10, clock.nowMs(), 30_000)).toEqual([]);

      const ack = (l: typeof txLease, outcome: DeliveryOutcome) =>
        store.mail.ack(
          { orgId: l.orgId, messageId: l.messageId, leaseId: l.leaseId, outcome, detail: `outcome ${outcome}` },
          POLICY,
          clock.nowMs(),
        );
      expect(await ack(txLease, DeliveryOutcome.DELIVERED)).toEqual({ current: true, status: MessageStatus.DELIVERED });
      expect(await ack(txLease, DeliveryOutcome.DELIVERED)).toEqual({
        current: false,
        status: MessageStatus.DELIVERED,
      });

      // Deferred: retried after 1 s, then 2 s; the third failure is final.
      let lease = bulkLease;
      for (const [attempt, wait] of [
        [1, 1_000],
        [2, 2_000],
      ] as const) {
        const deferredAt = clock.nowMs();
        expect(await ack(lease, DeliveryOutcome.DEFERRED)).toEqual({ current: true, status: MessageStatus.DEFERRED });
        clock.advance(wait - 1);
        // Nothing due yet; the recovery is told when the retry is.
        expect(await store.mail.recover(clock.nowMs(), POLICY)).toEqual({
          expired: 0,
          retried: 0,
          failed: 0,
          nextDueMs: deferredAt + wait,
        });
        clock.advance(1);
        expect(await store.mail.recover(clock.nowMs(), POLICY)).toEqual({
          expired: 0,
          retried: 1,
          failed: 0,
          nextDueMs: null,
        });
        expect((await store.mail.laneCounts(clock.nowMs())).find((c) => c.lane === Lane.BULK)).toMatchObject({
          depth: 1,
          deferred: 0,
        });
        await drain(Lane.BULK);
        [lease] = (await store.mail.lease(1, clock.nowMs(), 30_000)) as [typeof lease];
        expect(lease.attempt).toBe(attempt + 1);
      }
      expect(await ack(lease, DeliveryOutcome.DEFERRED)).toEqual({ current: true, status: MessageStatus.FAILED });

      const record = await store.mail.getMessage(org, lease.messageId);
      expect(record).toMatchObject({
        orgId: org,
        lane: Lane.BULK,
        status: MessageStatus.FAILED,
        attempts: 3,
        from: "Sender <s@d.example>",
        subject: expect.any(String),
      });
      expect(record!.version).toBe(record!.events.length);
      expect(record!.events.map((e) => e.status)).toEqual([
        MessageStatus.QUEUED, // accepted
        MessageStatus.QUEUED, // released
        MessageStatus.SENDING,
        MessageStatus.DEFERRED,
        MessageStatus.QUEUED, // retry
        MessageStatus.QUEUED, // released
        MessageStatus.SENDING,
        MessageStatus.DEFERRED,
        MessageStatus.QUEUED,
        MessageStatus.QUEUED,
        MessageStatus.SENDING,
        MessageStatus.FAILED,
      ]);
      expect(record!.events[0]).toEqual({ status: MessageStatus.QUEUED, atMs: expect.any(Number), detail: "accepted" });
      expect(await store.mail.getMessage(`${org}_other`, lease.messageId)).toBeNull();
    });

    test("a bounce puts the mailbox on cooldown for every organization", async () => {
      await send({ mailbox: "gone@example.com" });
      await drain(Lane.TRANSACTIONAL);
      const [l] = await store.mail.lease(1, clock.nowMs(), 30_000);
      await store.mail.ack(
        { orgId: org, messageId: l!.messageId, leaseId: l!.leaseId, outcome: DeliveryOutcome.BOUNCED, detail: "550" },
        POLICY,
        clock.nowMs(),
      );
      clock.advance(1_000);
      expect(await send({ mailbox: "gone@example.com" })).toEqual({
        kind: "limited",
        reason: "bounce_cooldown",
        retryAfterMs: HOUR - 1_000,
      });
      // Bulk sends do not check it.
      expect(
        (await send({ mailbox: "gone@example.com", lane: Lane.BULK, checkCooldown: false, countGuards: false })).kind,
      ).toBe("accepted");
      clock.advance(HOUR - 1_000);
      expect((await send({ mailbox: "gone@example.com" })).kind).toBe("accepted");
    });

    test("a bounce learned later (a DSN) cools the mailbox for every organization; a shorter one does not shorten it", async () => {
      const start = clock.nowMs();
      expect(await store.mail.coolDown("later@example.com", start, HOUR)).toBe(start + HOUR);
      expect(await store.mail.coolDown("later@example.com", start, MIN)).toBe(start + HOUR);
      clock.advance(1_000);
      expect(await send({ mailbox: "later@example.com" })).toEqual({
        kind: "limited",
        reason: "bounce_cooldown",
        retryAfterMs: HOUR - 1_000,
      });
      clock.advance(HOUR - 1_000);
      expect((await send({ mailbox: "later@example.com" })).kind).toBe("accepted");
    });

    test("an organization's sending state: a miss until rebuilt whole, then written through; another organization's apart", async () => {
      const now = clock.nowMs();
      expect(await store.mail.sendingState("org_state", "a@example.com", now)).toEqual({ kind: "miss" });
      // A write-through before the rebuild leaves it a miss: the rebuild will have it.
      await store.mail.projectSending("org_state", { suppressions: [["a@example.com", "manual"]] }, now);
      expect(await store.mail.sendingState("org_state", "a@example.com", now)).toEqual({ kind: "miss" });
      await store.mail.projectSending(
        "org_state",
        { suppressions: [["a@example.com", "hard_bounce"]], bulkPaused: null, loaded: true },
        now,
      );
      expect(await store.mail.sendingState("org_state", "a@example.com", now)).toEqual({
        kind: "known",
        suppressed: "hard_bounce",
        bulkPaused: undefined,
      });
      await store.mail.projectSending(
        "org_state",
        {
          suppressions: [
            ["a@example.com", null],
            ["b@example.com", "complaint"],
          ],
          bulkPaused: "complaint rate",
        },
        now,
      );
      expect(await store.mail.sendingState("org_state", "a@example.com", now)).toEqual({
        kind: "known",
        suppressed: undefined,
        bulkPaused: "complaint rate",
      });
      expect((await store.mail.sendingState("org_state", "b@example.com", now)).kind).toBe("known");
      await store.mail.projectSending("org_state", { bulkPaused: null }, now);
      expect(await store.mail.sendingState("org_state", "b@example.com", now)).toEqual({
        kind: "known",
        suppressed: "complaint",
        bulkPaused: undefined,
      });
      expect(await store.mail.sendingState("org_other_state", "b@example.com", now)).toEqual({ kind: "miss" });
    });

    test("a REJECTED ack fails the message at once and puts no mailbox on cooldown", async () => {
      await send({ mailbox: "refused@example.com" });
      await drain(Lane.TRANSACTIONAL);
      const [l] = await store.mail.lease(1, clock.nowMs(), 30_000);
      expect(
        await store.mail.ack(
          { ...l!, outcome: DeliveryOutcome.REJECTED, detail: "554 5.7.1 Message rejected as spam" },
          POLICY,
          clock.nowMs(),
        ),
      ).toEqual({ current: true, status: MessageStatus.FAILED });
      expect((await store.mail.getMessage(org, l!.messageId))!.events.at(-1)).toMatchObject({
        status: MessageStatus.FAILED,
        detail: "554 5.7.1 Message rejected as spam",
      });
      expect((await send({ mailbox: "refused@example.com" })).kind).toBe("accepted");
      expect(await store.mail.laneCounts(clock.nowMs())).toContainEqual(
        expect.objectContaining({ lane: Lane.TRANSACTIONAL, inFlight: 0, deferred: 0 }),
      );
    });

    test("the schedule in hours: the first attempt kept, retries when decided, the delayed notice once, failed at the end", async () => {
      await send();
      await drain(Lane.TRANSACTIONAL);
      const start = clock.nowMs();
      const tries = (n: number) => [
        {
          atMs: start + n,
          host: "mx.example.com",
          address: "192.0.2.1",
          tls: "unverified",
          stage: "rcpt",
          reply: "451 4.7.1 Greylisted",
          enhancedCode: "4.7.1",
        },
      ];
      let [l] = await store.mail.lease(1, clock.nowMs(), 30_000);
      expect(await store.mail.retryState(org, l!.messageId, "not the lease")).toBeNull();
      expect(await store.mail.retryState(org, l!.messageId, l!.leaseId)).toEqual({
        attempts: 1,
        firstAttemptMs: null,
        delayedSent: false,
      });
      const defer = (lease: typeof l, retryAtMs: number | null, delayedNotice?: string) =>
        store.mail.ack(
          {
            ...lease!,
            outcome: DeliveryOutcome.DEFERRED,
            detail: "451 4.7.1 Greylisted",
            attempts: tries(lease!.attempt),
            scheduled: { firstAttemptMs: start, untilMs: start + 48 * HOUR, retryAtMs, delayedNotice },
          },
          POLICY,
          clock.nowMs(),
        );
      // Deferred past the short schedule's attempts: the schedule in hours decides.
      for (let attempt = 1; attempt <= POLICY.maxAttempts + 1; attempt++) {
        const delayed = attempt === 2 ? "not delivered 4 hours after its first attempt" : undefined;
        expect(await defer(l, clock.nowMs() + 2 * HOUR, delayed)).toEqual({
          current: true,
          status: MessageStatus.DEFERRED,
        });
        const recovered = await store.mail.recover(clock.nowMs(), POLICY);
        expect(recovered.nextDueMs).toBe(clock.nowMs() + 2 * HOUR);
        clock.advance(2 * HOUR);
        expect((await store.mail.recover(clock.nowMs(), POLICY)).retried).toBe(1);
        await drain(Lane.TRANSACTIONAL);
        [l] = await store.mail.lease(1, clock.nowMs(), 30_000);
        expect(await store.mail.retryState(org, l!.messageId, l!.leaseId)).toEqual({
          attempts: attempt + 1,
          firstAttemptMs: start,
          delayedSent: attempt >= 2,
        });
      }
      expect(await defer(l, null)).toEqual({ current: true, status: MessageStatus.FAILED });
      const record = (await store.mail.getMessage(org, l!.messageId))!;
      expect(record.events.filter((e) => e.status === MessageStatus.DELAYED)).toEqual([
        {
          status: MessageStatus.DELAYED,
          atMs: start + 2 * HOUR,
          detail: "not delivered 4 hours after its first attempt",
        },
      ]);
      expect(record.events.at(-1)).toMatchObject({ status: MessageStatus.FAILED, detail: "451 4.7.1 Greylisted" });
      expect(record.deliveryAttempts).toEqual([1, 2, 3, 4, 5].flatMap(tries));
      expect(record.version).toBe(record.events.length);
    });

    test("under the schedule in hours, a lease that expires fails the message only after the end of its retries", async () => {
      await send();
      await drain(Lane.TRANSACTIONAL);
      const [first] = await store.mail.lease(1, clock.nowMs(), 5_000);
      const until = clock.nowMs() + HOUR;
      const scheduled = { firstAttemptMs: clock.nowMs(), untilMs: until, retryAtMs: clock.nowMs() };
      await store.mail.ack(
        { ...first!, outcome: DeliveryOutcome.DEFERRED, detail: "451", scheduled },
        POLICY,
        clock.nowMs(),
      );
      expect((await store.mail.recover(clock.nowMs(), POLICY)).retried).toBe(1);
      // Past the short schedule's last attempt, before the end of the retries: back in its lane each time.
      for (let i = 0; i <= POLICY.maxAttempts; i++) {
        await drain(Lane.TRANSACTIONAL);
        await store.mail.lease(1, clock.nowMs(), 5_000);
        clock.advance(5_000);
        expect(await store.mail.recover(clock.nowMs(), POLICY)).toMatchObject({ expired: 1, failed: 0 });
      }
      await drain(Lane.TRANSACTIONAL);
      await store.mail.lease(1, clock.nowMs(), 5_000);
      clock.advance(until - clock.nowMs());
      expect(await store.mail.recover(clock.nowMs(), POLICY)).toMatchObject({ expired: 0, failed: 1 });
      expect(await store.mail.getMessage(org, first!.messageId)).toMatchObject({ status: MessageStatus.FAILED });
    });

    test("an expired lease goes back to the head of its queue, released again through the pacing; the old lease's ack is ignored", async () => {
      await send();
      await send({ mailbox: "second@example.com" });
      await drain(Lane.TRANSACTIONAL);
      const leasedAt = clock.nowMs();
      const [first] = await store.mail.lease(1, clock.nowMs(), 5_000);
      expect((await store.mail.recover(clock.nowMs(), POLICY)).nextDueMs).toBe(leasedAt + 5_000);
      clock.advance(5_000);
      expect(await store.mail.recover(clock.nowMs(), POLICY)).toEqual({
        expired: 1,
        retried: 0,
        failed: 0,
        nextDueMs: null,
      });
      // Not ready for a worker until the lane releases it again.
      expect((await store.mail.laneCounts(clock.nowMs()))[0]).toMatchObject({ depth: 1, ready: 1, inFlight: 0 });
      expect(await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs())).toMatchObject({
        orgId: org,
        messageId: first!.messageId,
      });
      const [other, second] = await store.mail.lease(2, clock.nowMs(), 5_000);
      expect(other!.messageId).not.toBe(first!.messageId); // released before the expiry, still first in line
      await store.mail.ack({ ...other!, outcome: DeliveryOutcome.DELIVERED, detail: "ok" }, POLICY, clock.nowMs());
      expect(second).toMatchObject({ messageId: first!.messageId, attempt: 2 });
      const stale = await store.mail.ack(
        { ...first!, outcome: DeliveryOutcome.DELIVERED, detail: "late" },
        POLICY,
        clock.nowMs(),
      );
      expect(stale.current).toBe(false);
      const fresh = await store.mail.ack(
        { ...second!, outcome: DeliveryOutcome.DELIVERED, detail: "ok" },
        POLICY,
        clock.nowMs(),
      );
      expect(fresh).toEqual({ current: true, status: MessageStatus.DELIVERED });
    });

    test("a lease that expires on the last attempt fails the message", async () => {
      await send();
      for (let attempt = 1; attempt <= POLICY.maxAttempts; attempt++) {
        await drain(Lane.TRANSACTIONAL);
        const [l] = await store.mail.lease(1, clock.nowMs(), 5_000);
        expect(l!.attempt).toBe(attempt);
        clock.advance(5_000);
        const last = attempt === POLICY.maxAttempts;
        expect(await store.mail.recover(clock.nowMs(), POLICY)).toEqual({
          expired: last ? 0 : 1,
          retried: 0,
          failed: last ? 1 : 0,
          nextDueMs: null,
        });
        if (last)
          expect(await store.mail.getMessage(org, l!.messageId)).toMatchObject({
            status: MessageStatus.FAILED,
            attempts: POLICY.maxAttempts,
          });
      }
      expect(await store.mail.laneCounts(clock.nowMs())).toEqual([
        { lane: Lane.TRANSACTIONAL, depth: 0, ready: 0, inFlight: 0, deferred: 0, oldestAgeMs: 0 },
        { lane: Lane.BULK, depth: 0, ready: 0, inFlight: 0, deferred: 0, oldestAgeMs: 0 },
      ]);
    });

    test("lane counts: depth, ready, in flight and the oldest age", async () => {
      await send({ countGuards: false });
      clock.advance(1_000);
      await send({ countGuards: false });
      await send({ lane: Lane.BULK, countGuards: false, checkCooldown: false });
      clock.advance(500);
      await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());
      const counts = await store.mail.laneCounts(clock.nowMs());
      expect(counts).toEqual([
        { lane: Lane.TRANSACTIONAL, depth: 1, ready: 1, inFlight: 0, deferred: 0, oldestAgeMs: 500 },
        { lane: Lane.BULK, depth: 1, ready: 0, inFlight: 0, deferred: 0, oldestAgeMs: 500 },
      ]);
      await store.mail.lease(5, clock.nowMs(), 1_000);
      expect((await store.mail.laneCounts(clock.nowMs()))[0]).toMatchObject({ ready: 0, inFlight: 1 });
    });

    test("the From domain must be a verified domain in the organization's projection", async () => {
      expect(await send({ fromDomain: "other.example" })).toEqual({ kind: "domain_not_verified" });
      await project(org, 2, ["d.example", "other.example"]);
      expect((await send({ fromDomain: "other.example" })).kind).toBe("accepted");
      // Unverified again: refused again, and an older projection does not bring it back.
      await project(org, 3, ["d.example"]);
      await project(org, 2, ["d.example", "other.example"]);
      expect(await send({ fromDomain: "other.example" })).toEqual({ kind: "domain_not_verified" });
      // An organization the projection does not know is a miss (rebuilt from the records by the daemon).
      expect(await send({ orgId: "not-projected" })).toEqual({ kind: "miss" });
      // A replay needs no projection: it answers what was accepted.
      const key = { key: "k", bodyHash: "h", ttlMs: HOUR };
      const first = await send({ idempotency: key });
      await project(org, 4, []);
      expect(await send({ idempotency: key })).toEqual({
        kind: "replayed",
        messageId: (first as { messageId: string }).messageId,
      });
    });

    test("the queue cap: an organization holds its most messages until they leave the hot store; a replay and other organizations pass", async () => {
      const bulk = { lane: Lane.BULK, checkCooldown: false, countGuards: false, queueCap: { messages: 3, bytes: 1e9 } };
      const key = { key: "cap", bodyHash: "h", ttlMs: HOUR };
      const first = await send({ ...bulk, idempotency: key });
      expect(first.kind).toBe("accepted");
      for (let i = 0; i < 2; i++) expect((await send(bulk)).kind).toBe("accepted");
      expect(await send(bulk)).toEqual({ kind: "queue_full", reason: "messages" });
      // A refusal records nothing; the replay of an accepted send still answers; another organization has its own.
      expect((await store.mail.laneCounts(clock.nowMs())).find((l) => l.lane === Lane.BULK)?.depth).toBe(3);
      expect(await send({ ...bulk, idempotency: key })).toMatchObject({ kind: "replayed" });
      const other = `${org}_other`;
      await project(other);
      expect((await send({ ...bulk, orgId: other })).kind).toBe("accepted");

      // Delivered, then settled in the records as final: one message leaves the hot store and makes room for one.
      await drain(Lane.BULK);
      const [mine] = (await store.mail.lease(10, clock.nowMs(), 30_000)).filter((l) => l.orgId === org);
      await store.mail.ack({ ...mine!, outcome: DeliveryOutcome.DELIVERED, detail: "250 ok" }, POLICY, clock.nowMs());
      const written = (await store.outbox.changedMessages(100)).map((m) => ({
        orgId: m.orgId,
        id: m.id,
        version: m.version,
      }));
      expect(await store.outbox.settle(written)).toBe(1);
      expect((await send(bulk)).kind).toBe("accepted");
      expect(await send(bulk)).toEqual({ kind: "queue_full", reason: "messages" });

      // A copy the reconciliation drops leaves too; one it puts back counts again.
      const here = (await store.reconcile.unfinishedHere()).filter((w) => w.orgId === org);
      const dropped = here[0]!;
      const history = (await store.mail.getMessage(org, dropped.id))!;
      expect(await store.reconcile.drop([dropped])).toBe(1);
      expect((await send(bulk)).kind).toBe("accepted");
      expect(await send(bulk)).toEqual({ kind: "queue_full", reason: "messages" });
      await store.reconcile.drop([(await store.reconcile.unfinishedHere()).find((w) => w.orgId === org)!]);
      expect(await store.reconcile.restore([{ ...history, payload: "{}" }], clock.nowMs())).toEqual({
        requeued: 1,
        finished: 0,
      });
      expect(await send(bulk)).toEqual({ kind: "queue_full", reason: "messages" });
    });

    test("the queue cap on bytes: the payloads an organization holds, counted in bytes", async () => {
      // 2,000 bytes of UTF-8 in 1,000 characters: bytes, not characters, are counted.
      const payload = JSON.stringify({ text: "é".repeat(1_000) });
      const bytes = Buffer.byteLength(payload);
      const capped = {
        lane: Lane.BULK,
        checkCooldown: false,
        countGuards: false,
        payload,
        queueCap: { messages: 100, bytes: 3 * bytes - 1 },
      };
      for (let i = 0; i < 2; i++) expect((await send(capped)).kind).toBe("accepted");
      expect(await send(capped)).toEqual({ kind: "queue_full", reason: "bytes" });
      expect((await send({ ...capped, payload: "{}" })).kind).toBe("accepted");
    });
  });
}
