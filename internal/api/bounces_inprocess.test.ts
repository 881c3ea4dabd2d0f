// What a final refusal during delivery does, through the real API and the daemon's real
// DeliveryService (the ack a worker sends): only the mailbox's fault (a hard bounce) puts the
// mailbox on the bounce cooldown and on the organization's suppression list; one
// organization's content refusal (5.7.1) stops no one's sends, its own included; the history
// says the bounce's type, status and diagnostic.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { MasterKey } from "../dkim/seal";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryOutcome, Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { HotStore } from "../hotstore/hotstore";
import { returnPathFor } from "../returnpath/returnpath";
import { hotStoreServers, hotStores, releaseNext, SUITE_POLICY } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";

const HOUR = 3_600_000;
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`final refusals during delivery (${name} store)`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let svc: InProcess;
    const tokens: Record<string, string> = {};
    const ids: Record<string, string> = {};
    const master = MasterKey.generate();

    beforeAll(async () => {
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 10, 1, 8));
      svc = await startInProcess(store, clock, SUITE_POLICY, 60_000, { master });
      for (const slug of ["a", "b"]) {
        const org = await svc.sender(slug, Plan.PREMIUM);
        tokens[slug] = org.token;
        ids[slug] = org.id;
      }
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    async function call(slug: string, method: string, path: string, body?: unknown) {
      const res = await fetch(`${svc.apiUrl}${path}`, {
        method,
        headers: { Authorization: `Bearer ${tokens[slug]}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    }
    const send = (slug: string, to: string) =>
      call(slug, "POST", "/api/v1/emails", { from: `hi@${slug}.example`, to, subject: "s", text: "t" });

    /** Sends, and acks the one delivery as a worker would after the receiver's refusal. */
    async function refused(
      slug: string,
      to: string,
      outcome: DeliveryOutcome,
      reply: string,
      type: string,
      status: string,
    ) {
      const sent = await send(slug, to);
      expect(sent.status).toBe(202);
      while (await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs()));
      // The others waiting (sends of the tests before) are delivered.
      for (const leased of await store.mail.lease(100, clock.nowMs(), 60_000)) {
        const ours = leased.messageId === sent.body.id;
        await svc.clients.delivery.ack({
          leaseId: leased.leaseId,
          messageId: leased.messageId,
          orgId: leased.orgId,
          outcome: ours ? outcome : DeliveryOutcome.DELIVERED,
          detail: ours ? reply : "250 2.0.0 OK",
          bounce: ours ? { type, status, diagnostic: reply } : undefined,
        });
      }
      return sent.body.id as string;
    }

    test("org A's content refusal (5.7.1) puts nothing on cooldown or on a list: org B, and A itself, send again", async () => {
      const reply = "554 5.7.1 Message rejected: spam content detected";
      const id = await refused("a", "shared@example.net", DeliveryOutcome.REJECTED, reply, "policy", "5.7.1");
      expect((await send("b", "shared@example.net")).status).toBe(202);
      expect((await send("a", "Shared@example.net")).status).toBe(202);
      const listed = async () =>
        ((await call("a", "GET", "/api/v1/suppressions?limit=100")).body.data as { email: string }[]).map(
          (x) => x.email,
        );
      expect(await listed()).not.toContain("later-gone@example.net");
      const email = await call("a", "GET", `/api/v1/emails/${id}`);
      expect(email.body.status).toBe("failed");
      expect(email.body.events).toContainEqual(
        expect.objectContaining({ status: "failed", detail: `policy bounce 5.7.1: ${reply}` }),
      );
    });

    test("org A's hard bounce: on A's suppression list (A refused at once), on the spec's cooldown for B, on B's list never", async () => {
      const reply = "550 5.1.1 <gone@example.net>: Recipient address rejected: User unknown";
      const id = await refused("a", "gone@example.net", DeliveryOutcome.BOUNCED, reply, "hard", "5.1.1");
      const refusedA = await send("a", "gone@example.net");
      expect(refusedA.status).toBe(422);
      expect(refusedA.body.code).toBe("RECIPIENT_SUPPRESSED");
      expect((await call("a", "GET", "/api/v1/suppressions")).body.data).toEqual([
        {
          email: "gone@example.net",
          reason: "hard_bounce",
          detail: `5.1.1: ${reply}`,
          messageId: id,
          createdAt: new Date(clock.nowMs()).toISOString(),
        },
      ]);
      const cooled = await send("b", "gone@example.net");
      expect(cooled.status).toBe(429);
      expect(cooled.body.code).toBe("RECIPIENT_RATE_LIMITED");
      expect((await call("b", "GET", "/api/v1/suppressions")).body.data).toEqual([]);
      clock.advance(HOUR);
      expect((await send("b", "gone@example.net")).status).toBe(202);
      expect((await send("a", "gone@example.net")).status).toBe(422);
      const email = await call("a", "GET", `/api/v1/emails/${id}`);
      expect(email.body.events).toContainEqual(
        expect.objectContaining({ status: "bounced", detail: `hard bounce 5.1.1: ${reply}` }),
      );
    });

    test("soft bounces: counted per organization, suppressed at the third spread over 72 hours", async () => {
      const reply = "552 5.2.2 <full@example.net>: Mailbox full";
      for (const hoursLater of [0, 40, 40]) {
        clock.advance(hoursLater * HOUR);
        await refused("a", "full@example.net", DeliveryOutcome.REJECTED, reply, "soft", "5.2.2");
      }
      const listed = (await call("a", "GET", "/api/v1/suppressions?reason=soft_bounce")).body.data as {
        email: string;
      }[];
      expect(listed.map((s) => s.email)).toEqual(["full@example.net"]);
      expect((await send("b", "full@example.net")).status).toBe(202);
    });

    test("a DSN after a 250: the delivered message's status becomes bounced (hard) or failed (soft, policy), its history says why", async () => {
      const key = master.derive("return-path");
      const delivered: Record<string, string> = {};
      for (const to of ["later-gone@example.net", "later-spam@example.net"]) {
        const sent = await send("a", to);
        expect(sent.status).toBe(202);
        delivered[to] = sent.body.id as string;
      }
      while (await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs()));
      for (const leased of await store.mail.lease(100, clock.nowMs(), 60_000))
        await svc.clients.delivery.ack({
          leaseId: leased.leaseId,
          messageId: leased.messageId,
          orgId: leased.orgId,
          outcome: DeliveryOutcome.DELIVERED,
          detail: "250 2.0.0 OK",
        });
      const dsn = (to: string, status: string, type: string, diagnostic: string) =>
        svc.clients.feedback.applyReport({
          envelopeRecipient: returnPathFor(delivered[to]!, "a.example", key),
          kind: "dsn",
          recipients: [{ finalRecipient: to, action: "failed", status, diagnostic, type }],
        });
      const gone = "smtp; 550 5.1.1 <later-gone@example.net>: user unknown";
      const spam = "smtp; 554 5.7.1 rejected as spam";
      // Before the records hold the message: the sender is asked to come back (the inbound MX
      // answers 451), and nothing is applied yet.
      expect(await dsn("later-gone@example.net", "5.1.1", "hard", gone)).toMatchObject({ outcome: "pending" });
      const listed = async () =>
        ((await call("a", "GET", "/api/v1/suppressions?limit=100")).body.data as { email: string }[]).map(
          (x) => x.email,
        );
      expect(await listed()).not.toContain("later-gone@example.net");
      // The records writer does not run here: it writes the delivered messages, which leave the hot store.
      const changed = await store.outbox.changedMessages(100);
      await svc.records.history.write(changed);
      await store.outbox.settle(changed.map((m) => ({ orgId: m.orgId, id: m.id, version: m.version })));
      clock.advance(60_000);
      expect(await dsn("later-gone@example.net", "5.1.1", "hard", gone)).toMatchObject({ outcome: "applied" });
      expect(await dsn("later-spam@example.net", "5.7.1", "policy", spam)).toMatchObject({ outcome: "applied" });
      expect(await listed()).toContain("later-gone@example.net");
      for (const [to, status, detail] of [
        ["later-gone@example.net", "bounced", `hard bounce 5.1.1: ${gone}`],
        ["later-spam@example.net", "failed", `policy bounce 5.7.1: ${spam}`],
      ] as const) {
        const email = (await call("a", "GET", `/api/v1/emails/${delivered[to]}`)).body;
        expect({ to, status: email.status }).toEqual({ to, status });
        expect((email.events as { status: string; detail: string }[]).slice(-2)).toEqual([
          expect.objectContaining({ status: "delivered", detail: "250 2.0.0 OK" }),
          { status, detail, at: new Date(clock.nowMs()).toISOString() },
        ]);
      }
    });
  });
}
