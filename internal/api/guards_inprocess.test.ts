// The recipient guards through the real HTTP API and the daemon's real RPCs, with the
// daemon's clock moved by the test: 10 minutes and 24 hours pass in milliseconds.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { logger } from "../log/log";
import type { HotStore } from "../hotstore/hotstore";
import { hotStoreServers, hotStores, releaseNext } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";
import { tempDir } from "../testkit/testkit";
import { AckJournal } from "../worker/acks";
import { FileSink } from "../worker/transport";
import { Worker } from "../worker/worker";

const MIN = 60_000;
const HOUR = 60 * MIN;
const POLICY = { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: HOUR };
const LIMITED = { code: "RECIPIENT_RATE_LIMITED", message: "This recipient is temporarily rate limited." };

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`recipient guards through the API (${name} store)`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let svc: InProcess;
    let token: string;

    beforeAll(async () => {
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 10, 1, 8));
      svc = await startInProcess(store, clock, POLICY);
      await svc.clients.directory.createOrganization({ slug: "acme", plan: Plan.FREE });
      await svc.clients.directory.addDomain({ slug: "acme", domain: "acme.example", verified: true });
      token = (await svc.clients.directory.createToken({ slug: "acme" })).token;
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    async function send(to: string) {
      const res = await fetch(`${svc.apiUrl}/api/v1/emails`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: "Acme <no-reply@acme.example>", to, subject: "Your code", text: "123456" }),
      });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
    }

    test("5 in 10 minutes: the 6th is 429 with Retry-After; after 10 minutes it passes", async () => {
      for (let i = 0; i < 5; i++) {
        const ok = await send("jane@example.org");
        expect(ok.status).toBe(202);
        expect(ok.body).toEqual({
          id: expect.stringMatching(/^msg_[0-9a-f]{24}$/),
          status: "queued",
          lane: "transactional",
        });
        clock.advance(MIN);
      }
      const refused = await send("jane@example.org");
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual(LIMITED);
      expect(refused.headers.get("Retry-After")).toBe("300");
      expect(refused.headers.get("RateLimit-Policy")).toBe('"free";q=100;w=60');
      // The same mailbox, spelled otherwise, is the same mailbox.
      expect((await send("Jane+receipts@EXAMPLE.org")).status).toBe(429);
      expect((await send("john@example.org")).status).toBe(202);
      // A plan upgrade does not cure it.
      await svc.clients.directory.setPlan({ slug: "acme", plan: Plan.ENTERPRISE });
      expect((await send("jane@example.org")).status).toBe(429);
      clock.advance(5 * MIN);
      expect((await send("jane@example.org")).status).toBe(202);
    });

    test("20 in 24 hours", async () => {
      const mailbox = "daily@example.org";
      const start = clock.nowMs();
      for (let i = 0; i < 20; i++) {
        expect((await send(mailbox)).status).toBe(202);
        clock.advance(30 * MIN); // 2 per 10 minutes at most: only the 24-hour window binds
      }
      const refused = await send(mailbox);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual(LIMITED);
      const wait = (start + 24 * HOUR - clock.nowMs()) / 1_000;
      expect(refused.headers.get("Retry-After")).toBe(String(wait));
      clock.advance(wait * 1_000);
      expect((await send(mailbox)).status).toBe(202);
    });

    test("fixture addresses are not counted", async () => {
      for (let i = 0; i < 12; i++) expect((await send(`delivered+run${i % 2}@fixtures.test`)).status).toBe(202);
    });

    test("a hard bounce puts the mailbox on the organization's suppression list and on cooldown; the cooldown lifts after BOUNCE_COOLDOWN_S", async () => {
      const first = await send("bounced+signup@fixtures.test");
      expect(first.status).toBe(202);
      // Stand in for the lane scheduler, then let a real worker lease, simulate and ack it.
      while (await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs()));
      const worker = new Worker(svc.clients.delivery, new FileSink(tempDir()), {
        workerId: "test",
        maxInFlight: 4,
        log: logger("worker"),
        acks: new AckJournal(tempDir()),
      });
      const running = worker.run();
      const id = first.body.id as string;
      const status = async () =>
        (await (
          await fetch(`${svc.apiUrl}/api/v1/emails/${id}`, { headers: { Authorization: `Bearer ${token}` } })
        ).json()) as { status: string };
      for (let i = 0; i < 200 && (await status()).status !== "bounced"; i++) await Bun.sleep(10);
      await worker.stop();
      await running;
      expect(await status()).toMatchObject({ status: "bounced", attempts: 1 });

      clock.advance(MIN);
      // The organization's own list refuses it first; off the list, the cooldown still does.
      expect((await send("bounced@fixtures.test")).body.code).toBe("RECIPIENT_SUPPRESSED");
      const removed = await fetch(`${svc.apiUrl}/api/v1/suppressions/bounced@fixtures.test`, {
        method: "DELETE",
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(removed.status).toBe(204);
      const refused = await send("bounced@fixtures.test");
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual(LIMITED);
      expect(refused.headers.get("Retry-After")).toBe(String(HOUR / 1_000 - 60));
      clock.advance(HOUR - MIN);
      expect((await send("bounced@fixtures.test")).status).toBe(202);
    });
  });
}
