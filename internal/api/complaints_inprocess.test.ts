// Complaints through the daemon's real FeedbackService and the API: each puts the recipient on
// the organization's list; past 0.3% of its deliveries in 24 hours (with at least 1,000 of
// them) the organization's bulk sends are refused (403 BULK_LANE_PAUSED) while its transactional
// sends go on, until the operator resumes them; another organization is not touched.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MasterKey } from "../dkim/seal";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryOutcome, Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { HotStore } from "../hotstore/hotstore";
import { returnPathFor } from "../returnpath/returnpath";
import { hotStoreServers, hotStores, releaseNext, SUITE_POLICY } from "../testkit/hotstores";
import { SendingState } from "../daemon/sending_state";
import { type InProcess, startInProcess } from "../testkit/inprocess";
import { captureLogger } from "../testkit/logcapture";

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`complaints and the bulk pause (${name} store)`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let svc: InProcess;
    const master = MasterKey.generate();
    const key = master.derive("return-path");
    const tokens: Record<string, string> = {};
    const ids: Record<string, string> = {};

    beforeAll(async () => {
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 10, 1, 8));
      svc = await startInProcess(store, clock, SUITE_POLICY, 60_000, { master });
      for (const slug of ["a", "b"]) {
        const org = await svc.sender(slug, Plan.ENTERPRISE);
        tokens[slug] = org.token;
        ids[slug] = org.id;
      }
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    async function send(slug: string, to: string, lane: string) {
      const res = await fetch(`${svc.apiUrl}/api/v1/emails`, {
        method: "POST",
        headers: { Authorization: `Bearer ${tokens[slug]}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: `hi@${slug}.example`, to, subject: "s", text: "t", lane }),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    }

    test("four complaints of 1,000 delivered: listed, then bulk paused until resumed", async () => {
      // 996 delivered before, and the 4 messages complained about: 1,000.
      await svc.records.stats.add([{ orgId: ids.a!, atMs: clock.nowMs(), kind: "delivered", n: 996 }]);
      const sent: string[] = [];
      for (let i = 0; i < 4; i++) sent.push((await send("a", `reader${i}@example.org`, "bulk")).body.id as string);
      // Delivered; the records writer does not run here: the messages are written as it would.
      while (await releaseNext(store.mail, Lane.BULK, clock.nowMs()));
      for (const leased of await store.mail.lease(100, clock.nowMs(), 60_000))
        await svc.clients.delivery.ack({
          leaseId: leased.leaseId,
          messageId: leased.messageId,
          orgId: leased.orgId,
          outcome: DeliveryOutcome.DELIVERED,
          detail: "250 2.0.0 OK",
        });
      const changed = await store.outbox.changedMessages(100);
      await svc.records.history.write(changed);
      await store.outbox.settle(changed.map((m) => ({ orgId: m.orgId, id: m.id, version: m.version })));
      for (const [i, id] of sent.entries()) {
        const applied = await svc.clients.feedback.applyReport({
          envelopeRecipient: "fbl@feedback.test",
          kind: "arf",
          originalMailFrom: returnPathFor(id, "a.example", key),
          feedbackType: "abuse",
        });
        expect(applied).toMatchObject({
          outcome: "applied",
          messageId: id,
          tiedBy: "return-path",
          applied: "complaint",
        });
        // 3 of 1,000 is 0.3%, not over it; the fourth is.
        expect({ i, status: (await send("a", "new@example.org", "bulk")).status }).toEqual({
          i,
          status: i < 3 ? 202 : 403,
        });
      }
      const refused = await send("a", "new@example.org", "bulk");
      expect(refused.body).toEqual({
        code: "BULK_LANE_PAUSED",
        message: expect.stringContaining("complaint rate 0.40% (4 of 1000 delivered in 24 hours)"),
      });
      expect((await send("a", "new@example.org", "transactional")).status).toBe(202);
      expect((await send("b", "new@example.org", "bulk")).status).toBe(202);
      expect(await svc.records.suppressions.listed(ids.a!, ["reader0@example.org", "reader3@example.org"])).toEqual(
        new Set(["reader0@example.org", "reader3@example.org"]),
      );
      // Each complaint is in its message's history; the message stays as it was.
      const history = await svc.records.history.get(ids.a!, sent[0]!);
      expect(history!.status).toBe(MessageStatus.DELIVERED);
      expect(history!.events.at(-1)).toMatchObject({
        status: MessageStatus.DELIVERED,
        detail: "complaint (abuse) from a feedback loop",
      });
      // The 3 bulk messages a queued before the pause are held: b's bulk mail and a's transactional go.
      const drain = async (lane: Lane) => {
        const out: string[] = [];
        for (
          let r = await releaseNext(store.mail, lane, clock.nowMs());
          r;
          r = await releaseNext(store.mail, lane, clock.nowMs())
        )
          out.push(r.orgId);
        return out;
      };
      expect(await drain(Lane.BULK)).toEqual([ids.b!]);
      expect(await drain(Lane.TRANSACTIONAL)).toEqual([ids.a!]);
      // A hot store that lost the hold gets it back from the records (the reconciliation's round),
      // and a hold of an organization not paused is let go.
      const sending = new SendingState(store.mail, svc.records, clock, captureLogger().log);
      await store.mail.holdLane(ids.a!, Lane.BULK, false);
      await store.mail.holdLane(ids.b!, Lane.BULK, true);
      expect((await send("b", "later@example.org", "bulk")).status).toBe(202);
      await sending.syncHolds();
      expect(await store.mail.laneHolds(Lane.BULK)).toEqual([ids.a!]);
      expect(await drain(Lane.BULK)).toEqual([ids.b!]);
      expect(await svc.clients.feedback.resumeBulk({ slug: "a" })).toMatchObject({ resumed: true });
      expect(await svc.clients.feedback.resumeBulk({ slug: "a" })).toMatchObject({ resumed: false });
      expect((await send("a", "new@example.org", "bulk")).status).toBe(202);
      // Resumed: the held ones go out, and the new one.
      expect(await drain(Lane.BULK)).toEqual([ids.a!, ids.a!, ids.a!, ids.a!]);
    });
  });
}
