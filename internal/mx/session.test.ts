// One SMTP session against receivers the test starts on loopback addresses: well-behaved ones
// (smtp-server) and broken or hostile ones (raw sockets). Each failure must end within the
// session's deadlines, at the stage it happened, and classify as the delivery rules say.
import { afterAll, beforeAll, expect, test } from "bun:test";
import {
  acceptAll,
  type MxReceiver,
  type RawReceiver,
  scripted,
  startMxReceiver,
  startRawReceiver,
  type TestCa,
  testCa,
} from "../testkit/mxreceivers";
import { freePort, waitFor } from "../testkit/testkit";
import { classify } from "./outcome";
import { MxSession, SessionError, type SessionOptions } from "./session";

let port: number;
let ca: TestCa;
const stops: (() => Promise<void>)[] = [];
const FAST = { setupMs: 1_000, replyMs: 500, messageMs: 2_000 };
const MESSAGE = Buffer.from(
  "From: a@sender.test\r\nTo: b@rcpt.test\r\nSubject: t\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
    ".a line that starts with a dot\r\n..and two\r\nGrüße, 8-bit\r\n.\r\nend\r\n",
);

beforeAll(async () => {
  port = await freePort();
  ca = await testCa();
});
afterAll(async () => {
  await Promise.all(stops.map((s) => s()));
});

async function mx(opts: Omit<Parameters<typeof startMxReceiver>[0], "port">): Promise<MxReceiver> {
  const r = await startMxReceiver({ ...opts, port });
  stops.push(r.stop);
  return r;
}

async function raw(address: string, handle: Parameters<typeof startRawReceiver>[2]): Promise<RawReceiver> {
  const r = await startRawReceiver(address, port, handle);
  stops.push(r.stop);
  return r;
}

const options = (address: string, more: Partial<SessionOptions> = {}): SessionOptions => ({
  host: "mx.rcpt.test",
  address,
  port,
  heloName: "out.mailcore.test",
  tls: "opportunistic",
  timeouts: FAST,
  ...more,
});

async function failure(p: Promise<unknown>): Promise<SessionError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SessionError);
  return err as SessionError;
}

async function timed<T>(p: Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await p;
  return [v, performance.now() - t0];
}

test("delivers the exact bytes over opportunistic STARTTLS, EHLO with our name, two messages on one connection", async () => {
  const cert = await ca.issue(["mx.rcpt.test"]);
  const r = await mx({ address: "127.0.0.2", tls: cert });
  const s = await MxSession.open(options("127.0.0.2"));
  expect(s.tls).toBe("unverified");
  const reply = await s.send("bounce+1@rp.sender.test", "b@rcpt.test", MESSAGE);
  expect(reply).toStartWith("250");
  await s.reset();
  await s.send("bounce+2@rp.sender.test", "c@rcpt.test", MESSAGE);
  s.quit();
  expect(r.received.map((m) => [m.from, m.to, m.secure, m.helo])).toEqual([
    ["bounce+1@rp.sender.test", "b@rcpt.test", true, "out.mailcore.test"],
    ["bounce+2@rp.sender.test", "c@rcpt.test", true, "out.mailcore.test"],
  ]);
  expect(r.received[0]!.raw.equals(MESSAGE)).toBe(true);
  expect(r.received[1]!.connection).toBe(r.received[0]!.connection);
  expect(r.connections()).toBe(1);
});

test("verified TLS: a certificate for the host's name from a trusted CA", async () => {
  await mx({ address: "127.0.0.3", tls: await ca.issue(["mx.rcpt.test"]) });
  const s = await MxSession.open(options("127.0.0.3", { tls: "verified", trustedCa: [ca.cert] }));
  expect(s.tls).toBe("verified");
  await s.send("rp@sender.test", "b@rcpt.test", MESSAGE);
  s.quit();
});

test("an expired certificate: opportunistic TLS goes on without checking it; verified TLS fails at STARTTLS", async () => {
  const r = await mx({ address: "127.0.0.4", tls: await ca.issue(["mx.rcpt.test"], { expired: true }) });
  const s = await MxSession.open(options("127.0.0.4"));
  expect(s.tls).toBe("unverified");
  await s.send("rp@sender.test", "b@rcpt.test", MESSAGE);
  s.quit();
  expect(r.received).toHaveLength(1);
  const err = await failure(MxSession.open(options("127.0.0.4", { tls: "verified", trustedCa: [ca.cert] })));
  expect(err.stage).toBe("starttls");
  expect(err.error).toContain("expired");
  expect(classify(err)).toMatchObject({ verdict: "temporary", tryNextHost: true });
});

test("verified TLS refuses a valid certificate for another name", async () => {
  await mx({ address: "127.0.0.5", tls: await ca.issue(["other.example"]) });
  const err = await failure(MxSession.open(options("127.0.0.5", { tls: "verified", trustedCa: [ca.cert] })));
  expect(err.stage).toBe("starttls");
});

test("no STARTTLS offered: plaintext when opportunistic, no session when TLS is required", async () => {
  await mx({ address: "127.0.0.6", tls: false });
  const s = await MxSession.open(options("127.0.0.6"));
  expect(s.tls).toBe("none");
  s.quit();
  const err = await failure(MxSession.open(options("127.0.0.6", { tls: "required" })));
  expect(err.stage).toBe("starttls");
  expect(classify(err).verdict).toBe("temporary");
});

test("a host that accepts the connection and never greets: fails at the greeting within setupMs", async () => {
  const r = await raw("127.0.0.7", () => {});
  const [err, ms] = await timed(failure(MxSession.open(options("127.0.0.7"))));
  expect(err.stage).toBe("greeting");
  expect(ms).toBeLessThan(FAST.setupMs + 1_500);
  await waitFor("the connection closed", async () => r.open() === 0, 3_000);
});

test("nothing listening: fails at connect", async () => {
  const err = await failure(MxSession.open(options("127.0.0.8")));
  expect(err.stage).toBe("connect");
  expect(err.error).toContain("ECONNREFUSED");
  expect(classify(err)).toMatchObject({ verdict: "temporary", tryNextHost: true });
});

test("a host that stops answering in DATA: fails at data within replyMs, temporary", async () => {
  const r = await raw(
    "127.0.0.9",
    scripted((line) => (line === "<dot>" ? undefined : acceptAll(line))),
  );
  const s = await MxSession.open(options("127.0.0.9"));
  const [err, ms] = await timed(failure(s.send("rp@sender.test", "b@rcpt.test", MESSAGE)));
  expect(err.stage).toBe("data");
  expect(classify(err).verdict).toBe("temporary");
  expect(ms).toBeLessThan(FAST.replyMs + 1_500);
  expect(s.alive).toBe(false);
  await waitFor("the connection closed", async () => r.open() === 0, 3_000);
});

test("a host that trickles its reply a byte at a time: the message's deadline ends it", async () => {
  const r = await raw(
    "127.0.0.10",
    scripted((line, socket) => {
      if (line !== "<dot>") return acceptAll(line);
      const drip = setInterval(() => (socket.destroyed ? clearInterval(drip) : socket.write("2")), 100);
      return undefined;
    }),
  );
  const s = await MxSession.open(options("127.0.0.10"));
  const [err, ms] = await timed(failure(s.send("rp@sender.test", "b@rcpt.test", MESSAGE)));
  expect(err.stage).toBe("data");
  expect(err.error).toContain("no complete reply");
  expect(ms).toBeLessThan(FAST.messageMs + 1_500);
  await waitFor("the connection closed", async () => r.open() === 0, 3_000);
});

test("a reply line a megabyte long: the read is bounded and the connection dropped", async () => {
  const r = await raw(
    "127.0.0.11",
    scripted((line, socket) => {
      if (!line.toUpperCase().startsWith("EHLO")) return acceptAll(line);
      socket.write(`250-${"x".repeat(1024 * 1024)}`);
      return undefined;
    }),
  );
  const [err, ms] = await timed(
    failure(MxSession.open(options("127.0.0.11", { timeouts: { ...FAST, replyMs: 5_000 } }))),
  );
  expect(err.stage).toBe("ehlo");
  expect(err.error).toContain("maximum allowed size");
  expect(ms).toBeLessThan(3_000);
  await waitFor("the connection closed", async () => r.open() === 0, 3_000);
});

test("a host that closes after 250 to DATA, before QUIT: the message is delivered", async () => {
  await raw(
    "127.0.0.12",
    scripted((line, socket) => {
      if (line !== "<dot>") return acceptAll(line);
      socket.end("250 2.0.0 queued as X\r\n");
      return undefined;
    }),
  );
  const s = await MxSession.open(options("127.0.0.12"));
  expect(await s.send("rp@sender.test", "b@rcpt.test", MESSAGE)).toBe("250 2.0.0 queued as X");
  await waitFor("the connection closed", async () => !s.alive, 3_000);
  s.quit(); // nothing to do on a closed connection, and no error
  const err = await failure(s.reset());
  expect(err.stage).toBe("rset");
});

test("greylisting: 451 at RCPT the first time, with its hint; delivered the second time", async () => {
  const r = await mx({
    address: "127.0.0.13",
    rcpt: (_to, nth) => (nth === 1 ? "451 4.7.1 Greylisted, please try again in 300 seconds" : undefined),
  });
  const s = await MxSession.open(options("127.0.0.13"));
  const err = await failure(s.send("rp@sender.test", "b@rcpt.test", MESSAGE));
  expect(err.stage).toBe("rcpt");
  expect(err.reply).toMatchObject({ code: 451, enhanced: "4.7.1" });
  expect(classify(err)).toMatchObject({
    verdict: "temporary",
    bounce: { type: "transient", status: "4.7.1" },
    tryNextHost: false,
    retryAfterMs: 300_000,
  });
  const again = await MxSession.open(options("127.0.0.13"));
  expect(await again.send("rp@sender.test", "b@rcpt.test", MESSAGE)).toStartWith("250");
  again.quit();
  s.close();
  expect(r.received).toHaveLength(1);
});

test("550 5.1.1 at RCPT is a permanent failure of the mailbox; 554 after the dot one of the message", async () => {
  await mx({
    address: "127.0.0.14",
    rcpt: (to) => (to.startsWith("nobody") ? "550 5.1.1 No such user" : undefined),
    data: () => "554 5.7.1 Message rejected as spam",
  });
  const s = await MxSession.open(options("127.0.0.14"));
  const rcpt = await failure(s.send("rp@sender.test", "nobody@rcpt.test", MESSAGE));
  expect(rcpt.stage).toBe("rcpt");
  expect(classify(rcpt)).toMatchObject({ verdict: "permanent", bounce: { type: "hard", status: "5.1.1" } });
  const s2 = await MxSession.open(options("127.0.0.14"));
  const data = await failure(s2.send("rp@sender.test", "b@rcpt.test", MESSAGE));
  expect(data.stage).toBe("data");
  expect(classify(data)).toMatchObject({ verdict: "permanent", bounce: { type: "policy", status: "5.7.1" } });
  s.close();
  s2.close();
});
