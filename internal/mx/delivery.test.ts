// Delivery through destinations to receivers the test starts on loopback addresses. The route
// and MTA-STS lookups are tables here (the resolver is tested on its own against a real DNS
// server); what is under test is the queueing, the connections, the shaping and the results.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type MxReceiver, startMxReceiver, startRawReceiver, type TestCa, testCa } from "../testkit/mxreceivers";
import { VirtualTime } from "../testkit/virtualtime";
import { freePort, waitFor } from "../testkit/testkit";
import { MxDelivery, type MxDeliveryOptions } from "./delivery";
import type { RouteHost } from "./lookups";
import type { StsRule } from "./mtasts";
import { parseShaping, type Shaping } from "./shaping";

let port: number;
let ca: TestCa;
const stops: (() => Promise<void>)[] = [];
const routes = new Map<string, RouteHost[]>();
const policies = new Map<string, StsRule>();
const FAST = { setupMs: 1_000, replyMs: 800, messageMs: 3_000 };
const raw = (n: number) => Buffer.from(`From: a@sender.test\r\nTo: b@rcpt.test\r\nSubject: ${n}\r\n\r\nbody ${n}\r\n`);

beforeAll(async () => {
  port = await freePort();
  ca = await testCa();
});
afterAll(async () => {
  await Promise.all(stops.map((s) => s()));
});

function shaping(limits: Partial<Shaping["default"]> = {}, rules: object[] = []): Shaping {
  return parseShaping(
    {
      default: {
        connections: 10,
        messagesPerConnection: 100,
        messagesPerMinute: 60_000,
        tlsRequired: false,
        ...limits,
      },
      rules,
      rateLimitReplies: ["\\b4\\.7\\.28\\b", "rate limited"],
      slowdown: { minutes: 15, connections: 1, messagesPerMinute: 10 },
    },
    "test",
  );
}

function delivery(o: Partial<MxDeliveryOptions> = {}): MxDelivery {
  const d = new MxDelivery({
    resolveRoute: async (domain) => {
      const hosts = routes.get(domain);
      if (!hosts) throw Object.assign(new Error(`${domain} has a null MX`), { permanent: true, status: "5.1.10" });
      return { hosts };
    },
    lookupMtaSts: async (domain) => policies.get(domain),
    shaping: shaping(),
    heloName: "out.mailcore.test",
    port,
    timeouts: FAST,
    trustedCa: [ca.cert],
    ...o,
  });
  stops.push(async () => d.close());
  return d;
}

async function receiver(opts: Omit<Parameters<typeof startMxReceiver>[0], "port">): Promise<MxReceiver> {
  const r = await startMxReceiver({ ...opts, port });
  stops.push(r.stop);
  return r;
}

const send = (d: MxDelivery, to: string, n = 0) =>
  d.deliver({ returnPath: "rp@rp.sender.test", recipient: to, raw: raw(n) });

test("a destination limited to 2 connections never sees a third", async () => {
  const r = await receiver({ address: "127.0.0.20" });
  routes.set("two.test", [{ name: "mx.two.test", addresses: ["127.0.0.20"] }]);
  const d = delivery({ shaping: shaping({ connections: 2 }) });
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => send(d, `u${i}@two.test`, i)));
  expect(results.every((x) => x.verdict === "delivered")).toBe(true);
  expect(r.received).toHaveLength(30);
  expect(r.maxOpen()).toBe(2);
  expect(r.connections()).toBe(2);
});

test("50 messages on a connection, then a new connection", async () => {
  const r = await receiver({ address: "127.0.0.21" });
  routes.set("fifty.test", [{ name: "mx.fifty.test", addresses: ["127.0.0.21"] }]);
  const d = delivery({
    shaping: shaping({}, [{ name: "big", mxSuffixes: [".fifty.test"], connections: 1, messagesPerConnection: 50 }]),
  });
  const results = await Promise.all(Array.from({ length: 120 }, (_, i) => send(d, `u${i}@fifty.test`, i)));
  expect(results.every((x) => x.verdict === "delivered")).toBe(true);
  const perConnection = new Map<string, number>();
  for (const m of r.received) perConnection.set(m.connection, (perConnection.get(m.connection) ?? 0) + 1);
  expect([...perConnection.values()]).toEqual([50, 50, 20]);
  expect(r.maxOpen()).toBe(1);
});

test("a destination that hangs holds its own messages only", async () => {
  const slow = await receiver({ address: "127.0.0.22", data: () => "hang" });
  const fast = await receiver({ address: "127.0.0.23" });
  routes.set("slow.test", [{ name: "mx.slow.test", addresses: ["127.0.0.22"] }]);
  routes.set("fast.test", [{ name: "mx.fast.test", addresses: ["127.0.0.23"] }]);
  const d = delivery({ shaping: shaping({ connections: 1 }) });
  let slowDone = 0;
  const slowResults = Array.from({ length: 3 }, (_, i) =>
    send(d, `u${i}@slow.test`, i).then((x) => {
      slowDone++;
      return x;
    }),
  );
  const fastResults = await Promise.all(Array.from({ length: 10 }, (_, i) => send(d, `u${i}@fast.test`, i)));
  expect(fastResults.every((x) => x.verdict === "delivered")).toBe(true);
  expect(slowDone).toBe(0);
  const ended = await Promise.all(slowResults);
  expect(ended.map((x) => [x.verdict, x.attempts.at(-1)!.stage])).toEqual([
    ["temporary", "data"],
    ["temporary", "data"],
    ["temporary", "data"],
  ]);
  expect(slow.maxOpen()).toBe(1);
  expect(fast.received).toHaveLength(10);
});

test("the next MX when the preferred one refuses connections; each attempt is recorded", async () => {
  const r = await receiver({ address: "127.0.0.25", tls: await ca.issue(["mx2.pref.test"]) });
  routes.set("pref.test", [
    { name: "mx1.pref.test", addresses: ["127.0.0.24"] },
    { name: "mx2.pref.test", addresses: ["127.0.0.25"] },
  ]);
  const result = await send(delivery(), "u@pref.test");
  expect(result.verdict).toBe("delivered");
  expect(result.attempts.map((a) => [a.host, a.address, a.stage, a.verdict, a.tls])).toEqual([
    ["mx1.pref.test", "127.0.0.24", "connect", "temporary", "none"],
    ["mx2.pref.test", "127.0.0.25", "data", "delivered", "unverified"],
  ]);
  expect(result.attempts[1]!.reply).toStartWith("250");
  expect(r.received).toHaveLength(1);
});

test("a destination none of whose addresses gives a session is suspended: the next messages are deferred at once", async () => {
  const closer = await startRawReceiver("127.0.0.26", port, (s) => s.destroy());
  stops.push(closer.stop);
  routes.set("down.test", [{ name: "mx.down.test", addresses: ["127.0.0.26", "127.0.0.27"] }]);
  const d = delivery({ suspendMs: 60_000 });
  const first = await send(d, "a@down.test");
  expect(first.verdict).toBe("temporary");
  expect(first.attempts.map((a) => a.address)).toEqual(["127.0.0.26", "127.0.0.27"]);
  const second = await send(d, "b@down.test");
  expect(second.verdict).toBe("temporary");
  expect(second.attempts).toHaveLength(1);
  expect(second.attempts[0]!.stage).toBe("queue");
  expect(second.detail).toContain("suspended");
  expect(second.retryAfterMs).toBeGreaterThan(50_000);
  expect(closer.connections()).toBe(1);
});

test("MTA-STS enforce: verified TLS to a listed host, or no delivery (temporary)", async () => {
  const good = await receiver({ address: "127.0.0.28", tls: await ca.issue(["mx.sts-good.test"]) });
  const expired = await receiver({
    address: "127.0.0.29",
    tls: await ca.issue(["mx.sts-bad.test"], { expired: true }),
  });
  routes.set("sts-good.test", [{ name: "mx.sts-good.test", addresses: ["127.0.0.28"] }]);
  routes.set("sts-bad.test", [{ name: "mx.sts-bad.test", addresses: ["127.0.0.29"] }]);
  routes.set("sts-unlisted.test", [{ name: "mx.elsewhere.test", addresses: ["127.0.0.28"] }]);
  policies.set("sts-good.test", { mode: "enforce", mx: ["*.sts-good.test"] });
  policies.set("sts-bad.test", { mode: "enforce", mx: ["mx.sts-bad.test"] });
  policies.set("sts-unlisted.test", { mode: "enforce", mx: ["mx.sts-unlisted.test"] });
  const d = delivery();
  const ok = await send(d, "u@sts-good.test");
  expect(ok.verdict).toBe("delivered");
  expect(ok.attempts.at(-1)!.tls).toBe("verified");
  const bad = await send(d, "u@sts-bad.test");
  expect(bad.verdict).toBe("temporary");
  expect(bad.attempts[0]).toMatchObject({ stage: "starttls", host: "mx.sts-bad.test" });
  expect(expired.received).toHaveLength(0);
  const unlisted = await send(d, "u@sts-unlisted.test");
  expect(unlisted.verdict).toBe("temporary");
  expect(unlisted.detail).toContain("MTA-STS");
  expect(good.received).toHaveLength(1);
  // Without a policy, the expired certificate is no obstacle.
  policies.delete("sts-bad.test");
  expect((await send(delivery(), "u@sts-bad.test")).verdict).toBe("delivered");
});

test("greylisting: temporary with the reply's wait, then delivered once", async () => {
  const r = await receiver({
    address: "127.0.0.30",
    rcpt: (_to, nth) => (nth === 1 ? "450 4.2.0 Greylisted, try again in 5 minutes" : undefined),
  });
  routes.set("grey.test", [{ name: "mx.grey.test", addresses: ["127.0.0.30"] }]);
  const d = delivery();
  const first = await send(d, "u@grey.test");
  expect(first).toMatchObject({ verdict: "temporary", retryAfterMs: 300_000 });
  expect(first.attempts.at(-1)).toMatchObject({ stage: "rcpt", code: 450, enhanced: "4.2.0" });
  expect((await send(d, "u@grey.test")).verdict).toBe("delivered");
  expect(r.received).toHaveLength(1);
});

test("a rate-limit reply slows its destination down, and only it", async () => {
  await receiver({ address: "127.0.0.31", data: (_to, nth) => (nth === 1 ? "421 4.7.28 rate limited" : undefined) });
  await receiver({ address: "127.0.0.32" });
  routes.set("limited.test", [{ name: "mx.limited.test", addresses: ["127.0.0.31"] }]);
  routes.set("other.test", [{ name: "mx.other.test", addresses: ["127.0.0.32"] }]);
  const d = delivery();
  expect((await send(d, "u@limited.test")).verdict).toBe("temporary");
  await send(d, "u@other.test");
  const states = new Map(d.states().map((s) => [s.key, s]));
  expect(states.get("mx.limited.test")!.slowedUntilMs).toBeGreaterThan(Date.now() + 14 * 60_000);
  expect(states.get("mx.other.test")?.slowedUntilMs ?? 0).toBe(0);
});

test("a domain without a route fails at once; a resolver failure is temporary", async () => {
  const d = delivery();
  const nullMx = await send(d, "u@null.test");
  expect(nullMx.verdict).toBe("permanent");
  expect(nullMx.detail).toContain("null MX");
  expect(nullMx.bounce).toMatchObject({ type: "hard", status: "5.1.10" });
  const flaky = delivery({
    resolveRoute: async () => {
      throw new Error("SERVFAIL");
    },
  });
  expect((await send(flaky, "u@x.test")).verdict).toBe("temporary");
});

test("messages per minute: each waits its turn on the destination's clock", async () => {
  const r = await receiver({ address: "127.0.0.33" });
  routes.set("paced.test", [{ name: "mx.paced.test", addresses: ["127.0.0.33"] }]);
  const time = new VirtualTime(Date.now());
  const d = delivery({ time, shaping: shaping({ messagesPerMinute: 6 }), maxWaitMs: 60_000 });
  const results = Array.from({ length: 3 }, (_, i) => send(d, `u${i}@paced.test`, i));
  await waitFor("the first message", async () => r.received.length === 1);
  await time.runUntil(time.now + 9_999);
  await Bun.sleep(100); // nothing may arrive before its turn: give a wrong delivery the time to show
  expect(r.received).toHaveLength(1);
  await time.runUntil(time.now + 1);
  await waitFor("the second message", async () => r.received.length === 2);
  await time.runUntil(time.now + 10_000);
  await waitFor("the third message", async () => r.received.length === 3);
  expect((await Promise.all(results)).every((x) => x.verdict === "delivered")).toBe(true);
});

test("a message that waits longer than maxWaitMs for a connection is deferred, never sent", async () => {
  const r = await receiver({ address: "127.0.0.34", data: (_to, nth) => (nth === 1 ? "hang" : undefined) });
  routes.set("busy.test", [{ name: "mx.busy.test", addresses: ["127.0.0.34"] }]);
  const time = new VirtualTime(Date.now());
  const d = delivery({ time, shaping: shaping({ connections: 1 }), maxWaitMs: 5_000 });
  const first = send(d, "a@busy.test");
  const second = send(d, "b@busy.test");
  await waitFor("the first connection", async () => r.connections() === 1);
  await time.runUntil(time.now + 5_000);
  const deferred = await second;
  expect(deferred.verdict).toBe("temporary");
  expect(deferred.attempts[0]!.stage).toBe("queue");
  expect(deferred.detail).toContain("waited 5000 ms");
  expect((await first).verdict).toBe("temporary");
  expect(r.received).toHaveLength(0);
});

test("a destination holds at most maxQueued messages waiting; one more is deferred at once, never sent", async () => {
  const r = await receiver({ address: "127.0.0.35", data: (_to, nth) => (nth === 1 ? "hang" : undefined) });
  routes.set("full.test", [{ name: "mx.full.test", addresses: ["127.0.0.35"] }]);
  const d = delivery({ shaping: shaping({ connections: 1 }), maxQueued: 1 });
  const first = send(d, "a@full.test");
  await waitFor("the first connection", async () => r.connections() === 1);
  const second = send(d, "b@full.test"); // waits for the one connection
  const third = await send(d, "c@full.test");
  expect(third.verdict).toBe("temporary");
  expect(third.attempts[0]).toMatchObject({ stage: "queue", host: "" });
  expect(third.detail).toContain("1 messages wait for mx.full.test already");
  d.close();
  expect((await second).verdict).toBe("temporary");
  expect((await first).verdict).toBe("temporary");
  expect(r.received).toHaveLength(0);
});

test("a destination is failing from its first failed try until a host answers for good; forgotten destinations keep it", async () => {
  let down = true;
  await receiver({ address: "127.0.0.36", rcpt: () => (down ? "451 4.3.0 try later" : undefined) });
  routes.set("flaky.test", [{ name: "mx.flaky.test", addresses: ["127.0.0.36"] }]);
  const d = delivery();
  const failing = () => d.states().find((s) => s.key === "mx.flaky.test")?.failingSinceMs ?? 0;
  const before = Date.now();
  expect((await send(d, "a@flaky.test")).verdict).toBe("temporary");
  const since = failing();
  expect(since).toBeGreaterThanOrEqual(before);
  await send(d, "b@flaky.test");
  expect(failing()).toBe(since);
  down = false;
  expect((await send(d, "c@flaky.test")).verdict).toBe("delivered");
  expect(failing()).toBe(0);
});
