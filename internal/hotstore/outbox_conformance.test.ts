// The outbox of the hot store (OutboxStore): the message changes the records writer copies to
// the records, run against every adapter (embedded, Redis, Redis Cluster) with a moved clock.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { DeliveryOutcome, Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { hotStoreServers, hotStores, projectSuiteOrg, SUITE_POLICY as POLICY, suiteSends } from "../testkit/hotstores";
import type { HotStore } from "./hotstore";

const HOUR = 3_600_000;

let seq = 0;
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store outbox: ${name}`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let org: string;

    beforeEach(async () => {
      if (store) await store.lifecycle.close();
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 5, 1) + ++seq * 100 * 24 * HOUR);
      org = `org_${name}_${seq}`;
      await projectSuiteOrg(store.admission, org);
    });
    afterAll(async () => {
      await store?.lifecycle.close();
    });

    const sends = suiteSends(() => ({ mail: store.mail, clock, org, idPrefix: `msg_${name}_${seq}` }));
    const { send, drain } = sends;

    test("the outbox: changed messages until written; a final one then leaves the hot store", async () => {
      const a = (await send({ countGuards: false })) as { messageId: string };
      const b = (await send({ countGuards: false, mailbox: "b@example.com" })) as { messageId: string };
      let changed = await store.outbox.changedMessages(10);
      expect(changed.map((m) => [m.id, m.version, m.events.length])).toEqual([
        [a.messageId, 1, 1],
        [b.messageId, 1, 1],
      ]);
      expect(changed[0]).toMatchObject({
        orgId: org,
        to: "user@example.com",
        toMailbox: "user@example.com",
        status: MessageStatus.QUEUED,
        attempts: 0,
      });
      expect(await store.outbox.changedMessages(1)).toHaveLength(1);
      // Written at version 1: both leave the outbox, neither the hot store (not final).
      expect(await store.outbox.settle(changed.map((m) => ({ orgId: m.orgId, id: m.id, version: m.version })))).toBe(0);
      expect(await store.outbox.changedMessages(10)).toEqual([]);
      expect(await store.mail.getMessage(org, a.messageId)).not.toBeNull();

      await drain(Lane.TRANSACTIONAL);
      const leased = await store.mail.lease(2, clock.nowMs(), 30_000);
      for (const l of leased)
        await store.mail.ack({ ...l, outcome: DeliveryOutcome.DELIVERED, detail: "250 ok" }, POLICY, clock.nowMs());
      changed = await store.outbox.changedMessages(10);
      expect(changed.map((m) => [m.version, m.status])).toEqual([
        [4, MessageStatus.DELIVERED],
        [4, MessageStatus.DELIVERED],
      ]);
      // A message that changed after it was read stays: here b is written at an older version.
      const [ma, mb] = changed as [(typeof changed)[0], (typeof changed)[0]];
      expect(
        await store.outbox.settle([
          { orgId: org, id: ma.id, version: ma.version },
          { orgId: org, id: mb.id, version: mb.version - 1 },
        ]),
      ).toBe(1);
      expect(await store.mail.getMessage(org, ma.id)).toBeNull();
      expect((await store.outbox.changedMessages(10)).map((m) => m.id)).toEqual([mb.id]);
      expect(await store.outbox.settle([{ orgId: org, id: mb.id, version: mb.version }])).toBe(1);
      expect(await store.outbox.changedMessages(10)).toEqual([]);
      expect(await store.mail.getMessage(org, mb.id)).toBeNull();
    });
  });
}
