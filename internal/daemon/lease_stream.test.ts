// The workers' lease stream through the daemon's real RPCs, with a moved clock.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryOutcome, Lane, type SigningKey } from "../gen/mailcore/limiter/v1/mail_pb";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import { releaseNext } from "../testkit/hotstores";
import { type InProcess, startInProcess, ticketFor } from "../testkit/inprocess";

const HOUR = 3_600_000;
const POLICY = { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: HOUR };
let svc: InProcess;
let store: EmbeddedHot;
const clock = new ManualClock();

beforeAll(async () => {
  store = new EmbeddedHot(null);
  svc = await startInProcess(store, clock, POLICY, 5_000);
  await svc.clients.directory.createOrganization({ slug: "acme", plan: Plan.FREE });
  await svc.clients.directory.addDomain({ slug: "acme", domain: "acme.example", verified: true });
});
afterAll(async () => {
  await svc.stop();
  await store.lifecycle.close();
});

test("a stream whose ack never came is not stalled: the expired lease stops counting and the message comes again", async () => {
  const sent = await svc.clients.mail.send(
    {
      lane: Lane.TRANSACTIONAL,
      email: {
        from: "a@acme.example",
        fromAddress: "a@acme.example",
        to: "b@example.org",
        toAddress: "b@example.org",
        subject: "s",
        text: "t",
      },
    },
    await ticketFor(svc.clients, "acme"),
  );
  await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());

  const abort = new AbortController();
  const stream = svc.clients.delivery
    .lease({ workerId: "test", maxInFlight: 1 }, { signal: abort.signal })
    [Symbol.asyncIterator]();
  const first = (await stream.next()).value!;
  expect(first).toMatchObject({ messageId: sent.messageId, attempt: 1 });
  // No ack. The lease expires, the daemon's recovery puts the message back in its lane, and
  // the lane releases it again (this test plays the scheduler).
  clock.advance(5_000);
  expect(await store.mail.recover(clock.nowMs(), POLICY)).toEqual({
    expired: 1,
    retried: 0,
    failed: 0,
    nextDueMs: null,
  });
  await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());
  const second = (await stream.next()).value!;
  expect(second).toMatchObject({ messageId: sent.messageId, attempt: 2 });
  expect(second.leaseId).not.toBe(first.leaseId);
  // The late ack of the first lease changes nothing; the current one counts.
  const late = await svc.clients.delivery.ack({
    leaseId: first.leaseId,
    messageId: first.messageId,
    orgId: first.orgId,
    outcome: DeliveryOutcome.DELIVERED,
    detail: "late",
  });
  expect(late.current).toBe(false);
  const current = await svc.clients.delivery.ack({
    leaseId: second.leaseId,
    messageId: second.messageId,
    orgId: second.orgId,
    outcome: DeliveryOutcome.DELIVERED,
    detail: "ok",
  });
  expect(current.current).toBe(true);
  abort.abort();
});

test("a lease carries its From domain's DKIM key and the message's return path; a fixture's, no key", async () => {
  const ticket = await ticketFor(svc.clients, "acme");
  const send = (to: string) =>
    svc.clients.mail.send(
      {
        lane: Lane.TRANSACTIONAL,
        email: { from: "a@acme.example", fromAddress: "a@acme.example", to, toAddress: to, subject: "s", text: "t" },
      },
      ticket,
    );
  const real = await send("c@example.org");
  const fixture = await send("delivered@fixtures.test");
  await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());
  await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs());
  const abort = new AbortController();
  const stream = svc.clients.delivery
    .lease({ workerId: "test", maxInFlight: 2 }, { signal: abort.signal })
    [Symbol.asyncIterator]();
  const leased = [(await stream.next()).value!, (await stream.next()).value!];
  abort.abort();
  const byId = new Map(leased.map((l) => [l.messageId, l]));
  const signedLease = byId.get(real.messageId)!;
  expect(signedLease.signingKeys.map((k: SigningKey) => [k.domain, k.selector, k.algorithm])).toEqual([
    ["acme.example", expect.stringMatching(/^mc\d{6}a$/), "rsa-sha256"],
  ]);
  // PKCS#8 DER of an RSA key, opened by the daemon from its sealed form.
  expect(signedLease.signingKeys[0]!.privateKey.length).toBeGreaterThan(1_000);
  expect(signedLease.returnPath).toMatch(new RegExp(`^${real.messageId}-[a-z2-7]{16}@bounces\\.acme\\.example$`));
  const fixtureLease = byId.get(fixture.messageId)!;
  expect(fixtureLease.signingKeys).toEqual([]);
  expect(fixtureLease.returnPath).toEndWith("@bounces.acme.example");
});
