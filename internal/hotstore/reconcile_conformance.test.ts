// The reconciliation seam of the hot store (ReconcileStore): which messages it has, and putting
// back the ones it lost as the records keep them, run against every adapter. A loss is a new
// store: a fresh embedded one, or a flushed Redis.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { DeliveryOutcome, Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MessageHistory } from "../model/history";
import {
  hotStoreServers,
  hotStores,
  projectSuiteOrg,
  releaseNext,
  SUITE_POLICY as POLICY,
  suiteSends,
} from "../testkit/hotstores";
import { type HotStore, OUTBOX_PAYLOAD_BYTES } from "./hotstore";

const HOUR = 3_600_000;

let seq = 0;
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store reconciliation: ${name}`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let org: string;

    const fresh = async () => {
      await store?.lifecycle.close();
      store = await open();
      await projectSuiteOrg(store.admission, org);
    };
    beforeEach(async () => {
      clock = new ManualClock(Date.UTC(2026, 6, 1) + ++seq * 100 * 24 * HOUR);
      org = `org_${name}_${seq}`;
      await fresh();
    });
    afterAll(async () => {
      await store?.lifecycle.close();
    });

    const { send, drain } = suiteSends(() => ({ mail: store.mail, clock, org, idPrefix: `msg_${name}_${seq}` }));
    const ids = async (n: number) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++)
        out.push(
          ((await send({ countGuards: false, mailbox: `m${i}@example.com` })) as { messageId: string }).messageId,
        );
      return out;
    };
    /** What the records hold after a flush: every changed message as the outbox hands it. */
    const written = async () => {
      const changed = await store.outbox.changedMessages(100);
      await store.outbox.settle(changed.map((m) => ({ orgId: m.orgId, id: m.id, version: m.version })));
      return new Map(changed.map((m) => [m.id, m]));
    };
    const refs = (list: string[]) => list.map((id) => ({ orgId: org, id }));

    test("the outbox hands over the payload of a message not final once, and a batch's payloads up to the budget", async () => {
      const [a, b] = await ids(2);
      let records = await written();
      expect(JSON.parse(records.get(a!)!.payload!)).toEqual({ n: expect.any(Number) });
      expect(records.get(b!)!.payload).toBeDefined();
      await drain(Lane.TRANSACTIONAL);
      const [leased] = await store.mail.lease(1, clock.nowMs(), 30_000);
      await store.mail.ack({ ...leased!, outcome: DeliveryOutcome.DELIVERED, detail: "250 ok" }, POLICY, clock.nowMs());
      records = await written();
      const other = leased!.messageId === a ? b! : a!;
      expect(records.get(leased!.messageId)!.status).toBe(MessageStatus.DELIVERED);
      expect(records.get(leased!.messageId)!.payload).toBeUndefined();
      // Released since, not final: the records have its payload already.
      expect(records.get(other)!.version).toBe(2);
      expect(records.get(other)!.payload).toBeUndefined();

      const big = "x".repeat(OUTBOX_PAYLOAD_BYTES * 0.4);
      for (let i = 0; i < 3; i++) await send({ countGuards: false, mailbox: `big${i}@example.com`, payload: big });
      // Two fit in the budget; the third waits for the next batch, and comes alone however large.
      expect((await store.outbox.changedMessages(10)).map((m) => m.payload?.length)).toEqual([big.length, big.length]);
      await written();
      expect((await store.outbox.changedMessages(10)).map((m) => m.payload?.length)).toEqual([big.length]);
      await send({ countGuards: false, mailbox: "huge@example.com", payload: "y".repeat(OUTBOX_PAYLOAD_BYTES + 1) });
      await written();
      expect((await store.outbox.changedMessages(10)).map((m) => m.payload?.length)).toEqual([
        OUTBOX_PAYLOAD_BYTES + 1,
      ]);
    });

    test("lost messages are put back in their lanes with their payload and history; a kept ack finishes its message", async () => {
      const [a, b, c] = await ids(3);
      await drain(Lane.TRANSACTIONAL);
      const leased = await store.mail.lease(3, clock.nowMs(), 30_000);
      const payloads = new Map(leased.map((l) => [l.messageId, l.payload]));
      const records = await written();
      expect(await store.reconcile.presence(refs([a!, b!, c!]))).toEqual(["here", "here", "here"]);

      await fresh(); // the hot store lost everything
      expect(await store.reconcile.presence(refs([a!, b!, c!]))).toEqual(["missing", "missing", "missing"]);
      // a's worker acks after the loss (delivered), b's defers: both are kept; c's worker is silent.
      const la = leased.find((l) => l.messageId === a)!;
      const lb = leased.find((l) => l.messageId === b)!;
      const acked = await store.mail.ack({ ...la, outcome: DeliveryOutcome.DELIVERED, detail: "250 ok" }, POLICY, 0);
      expect(acked.current).toBe(false);
      await store.mail.ack({ ...lb, outcome: DeliveryOutcome.DEFERRED, detail: "451 later" }, POLICY, 0);
      expect(await store.reconcile.presence(refs([a!, b!, c!]))).toEqual(["acked", "acked", "missing"]);
      // A message accepted after the loss waits behind c, which goes back at the head of the queue.
      const [d] = await ids(1);

      clock.advance(1_000);
      const history = [a!, b!, c!].map((id) => records.get(id)!);
      expect(await store.reconcile.restore(history, clock.nowMs())).toEqual({ requeued: 2, finished: 1 });
      expect(await store.reconcile.presence(refs([a!, b!, c!, d!]))).toEqual(["here", "here", "here", "here"]);
      // Once is enough: a message that is here is left alone.
      expect(await store.reconcile.restore(history, clock.nowMs())).toEqual({ requeued: 0, finished: 0 });

      const ma = (await store.mail.getMessage(org, a!)) as MessageHistory;
      expect(ma.status).toBe(MessageStatus.DELIVERED);
      expect(ma.version).toBe(records.get(a!)!.version + 1);
      expect(ma.events.slice(0, -1)).toEqual(records.get(a!)!.events);
      expect(ma.events.at(-1)).toEqual({ status: MessageStatus.DELIVERED, atMs: clock.nowMs(), detail: "250 ok" });
      const mc = (await store.mail.getMessage(org, c!)) as MessageHistory;
      expect(mc).toMatchObject({ status: MessageStatus.QUEUED, attempts: 1, subject: records.get(c!)!.subject });
      expect(mc.events.at(-1)!.detail).toBe("restored from the records; back in its lane");

      // The records writer sees every restored message as changed, the unfinished ones with their payload.
      const changed = new Map((await store.outbox.changedMessages(100)).map((m) => [m.id, m]));
      expect(changed.get(a!)!.payload).toBeUndefined();
      expect(changed.get(c!)!.payload).toBe(payloads.get(c!)!);
      expect(changed.get(b!)!.version).toBe(records.get(b!)!.version + 1);

      // c first (the head), then d, then b (a deferred ack's retry, at the tail); same payloads as before.
      await drain(Lane.TRANSACTIONAL);
      const again = await store.mail.lease(10, clock.nowMs(), 30_000);
      expect(again.map((l) => l.messageId)).toEqual([c!, d!, b!]);
      expect(again.find((l) => l.messageId === b)!.payload).toBe(payloads.get(b!)!);
      expect(again.find((l) => l.messageId === c)!.attempt).toBe(2);
      expect((await store.mail.laneCounts(clock.nowMs())).find((l) => l.lane === Lane.TRANSACTIONAL)!.depth).toBe(0);
    });

    test("the messages not yet final are listed at their version; stale copies are dropped from wherever they are", async () => {
      const [a, b, c, d] = await ids(4);
      await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());
      await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());
      const [leased] = await store.mail.lease(1, clock.nowMs(), 30_000);
      expect(leased!.messageId).toBe(a!);
      const order = [a!, b!, c!, d!];
      const here = (await store.reconcile.unfinishedHere()).sort((x, y) => order.indexOf(x.id) - order.indexOf(y.id));
      expect(here).toEqual([
        { orgId: org, id: a!, version: 3 },
        { orgId: org, id: b!, version: 2 },
        { orgId: org, id: c!, version: 1 },
        { orgId: org, id: d!, version: 1 },
      ]);
      // b has moved on since the version given: it stays.
      const stale = [
        { orgId: org, id: a!, version: 3 },
        { orgId: org, id: b!, version: 1 },
        { orgId: org, id: c!, version: 1 },
      ];
      expect(await store.reconcile.drop(stale)).toBe(2);
      expect(await store.reconcile.drop(stale)).toBe(0);
      expect(await store.reconcile.presence(refs([a!, b!, c!, d!]))).toEqual(["missing", "here", "missing", "here"]);
      expect((await store.mail.laneCounts(clock.nowMs())).find((l) => l.lane === Lane.TRANSACTIONAL)).toMatchObject({
        depth: 1,
        ready: 1,
        inFlight: 0,
      });
      expect(await drain(Lane.TRANSACTIONAL)).toEqual([org]);
      const [lb] = await store.mail.lease(10, clock.nowMs(), 30_000);
      expect(lb!.messageId).toBe(b!);
      // The dropped lease does not come back, and its late ack is kept.
      clock.advance(31_000);
      expect((await store.mail.recover(clock.nowMs(), POLICY)).expired).toBe(2);
      await store.mail.ack({ ...leased!, outcome: DeliveryOutcome.DELIVERED, detail: "250 ok" }, POLICY, clock.nowMs());
      expect(await store.reconcile.presence(refs([a!]))).toEqual(["acked"]);
      expect(new Set((await store.outbox.changedMessages(100)).map((m) => m.id))).toEqual(new Set([b!, d!]));
      // An ack under a lost lease is kept too: b's copy, found stale and dropped, was delivered.
      expect(
        (await store.mail.ack({ ...lb!, outcome: DeliveryOutcome.DELIVERED, detail: "250" }, POLICY, 0)).current,
      ).toBe(false);
      expect(await store.reconcile.presence(refs([b!]))).toEqual(["here"]);
      expect(await store.reconcile.drop((await store.reconcile.unfinishedHere()).filter((m) => m.id === b))).toBe(1);
      expect(await store.reconcile.presence(refs([b!]))).toEqual(["acked"]);
    });
  });
}
