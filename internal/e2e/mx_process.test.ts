// Delivery to the recipients' MX hosts through the whole stack: limiterd, api and a worker with
// DELIVERY=mx, a dnsmasq of the test's own for the MX, A and MTA-STS records, and receivers on
// loopback addresses (127.0.0.51 and up) on one port (MX_PORT), well-behaved and hostile. The
// retry schedule in hours is divided by 1,000 (a minute is 60 ms) and the session deadlines cut
// to a second or two, so each case ends in seconds; internal/mx's unit tests cover each in depth.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https";
import { join } from "node:path";
import { type Dnsmasq, type DnsRecord, oneMx, startDnsmasq } from "../testkit/dnsmasq";
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
import { freePort, sendEmail, type Stack, startStack, tempDir, waitFor } from "../testkit/testkit";

interface Try {
  host: string;
  address: string;
  tls: string;
  stage: string;
  reply: string;
  enhancedCode: string;
}

interface EmailView {
  status: string;
  attempts: number;
  events: { status: string; detail: string }[];
  deliveryAttempts: Try[];
}

let stack: Stack;
let token: string;
let dns: Dnsmasq;
let ca: TestCa;
let port: number;
let metricsPort: number;
const stops: (() => Promise<void>)[] = [];

const A = (name: string, address: string): DnsRecord => ({ type: "A", name, address });
const MX = (name: string, preference: number, exchange: string): DnsRecord => ({
  type: "MX",
  name,
  preference,
  exchange,
});

/** When the greylisting receiver first saw each recipient. */
const greySeen = new Map<string, number>();
const GREY_DELAY_MS = 250;
let closerDots = 0;

async function receiver(opts: Omit<Parameters<typeof startMxReceiver>[0], "port">): Promise<MxReceiver> {
  const r = await startMxReceiver({ ...opts, port });
  stops.push(r.stop);
  return r;
}

async function raw(address: string, handle: Parameters<typeof startRawReceiver>[2]): Promise<RawReceiver> {
  const r = await startRawReceiver(address, port, handle);
  stops.push(r.stop);
  return r;
}

let preferred: MxReceiver;
let implicit: MxReceiver;
let grey: MxReceiver;
let stall: MxReceiver;
let expired: MxReceiver;
let sts: MxReceiver;
let shaped: MxReceiver;

beforeAll(async () => {
  port = await freePort();
  metricsPort = await freePort();
  ca = await testCa();
  // The well-behaved and the hostile receivers.
  preferred = await receiver({ address: "127.0.0.52" });
  implicit = await receiver({ address: "127.0.0.53" });
  grey = await receiver({
    address: "127.0.0.54",
    rcpt: (to) => {
      const first = greySeen.get(to) ?? Date.now();
      greySeen.set(to, first);
      return Date.now() - first < GREY_DELAY_MS ? "451 4.7.1 Greylisted, please come back later" : undefined;
    },
  });
  await raw("127.0.0.55", () => {}); // accepts, never greets
  stall = await receiver({ address: "127.0.0.56", data: () => "hang" }); // silent after the message's dot
  await raw(
    "127.0.0.57",
    scripted((line) => (line.toUpperCase().startsWith("EHLO") ? `250-${"x".repeat(1024 * 1024)}` : acceptAll(line))),
  );
  await raw(
    "127.0.0.58",
    scripted((line, socket) => {
      if (line !== "<dot>") return acceptAll(line);
      closerDots++;
      socket.end("250 2.0.0 queued\r\n"); // and gone before QUIT
      return undefined;
    }),
  );
  expired = await receiver({ address: "127.0.0.59", tls: await ca.issue(["mx.expired.test"], { expired: true }) });
  sts = await receiver({ address: "127.0.0.61", tls: await ca.issue(["mx.sts.test"], { expired: true }) });
  shaped = await receiver({ address: "127.0.0.62", dataDelayMs: 30 });
  stops.push(await mtaStsServer("127.0.0.60", "sts.test", "mx.sts.test"));

  dns = await startDnsmasq([
    MX("pref.test", 10, "mx1.pref.test"),
    A("mx1.pref.test", "127.0.0.51"), // nothing listens: refused
    MX("pref.test", 20, "mx2.pref.test"),
    A("mx2.pref.test", "127.0.0.52"),
    A("implicit.test", "127.0.0.53"),
    MX("nullmx.test", 0, "."),
    ...oneMx("grey.test", "127.0.0.54"),
    ...oneMx("silent.test", "127.0.0.55"),
    ...oneMx("stall.test", "127.0.0.56"),
    ...oneMx("longline.test", "127.0.0.57"),
    ...oneMx("closer.test", "127.0.0.58"),
    ...oneMx("expired.test", "127.0.0.59"),
    ...oneMx("sts.test", "127.0.0.61"),
    { type: "TXT", name: "_mta-sts.sts.test", strings: ["v=STSv1; id=20261128"] },
    A("mta-sts.sts.test", "127.0.0.60"),
    ...oneMx("shaped.test", "127.0.0.62"),
  ]);
  stops.push(dns.stop);

  const dir = tempDir();
  const caFile = join(dir, "ca.pem");
  writeFileSync(caFile, ca.cert);
  const shapingFile = join(dir, "shaping.json");
  writeFileSync(
    shapingFile,
    JSON.stringify({
      default: { connections: 10, messagesPerConnection: 100, messagesPerMinute: 60_000, tlsRequired: false },
      rules: [{ name: "shaped", mxSuffixes: ["mx.shaped.test"], connections: 2, messagesPerConnection: 50 }],
      rateLimitReplies: ["rate limited"],
      slowdown: { minutes: 15, connections: 1, messagesPerMinute: 10 },
    }),
  );
  stack = await startStack({
    // 2 hours of retries, divided by 1,000: 7.2 s; tries after 60, 300, 900, 1,800, 3,600 ms.
    env: { DNS_SERVER: dns.address, MAX_RETRY_HOURS: "2", RETRY_SCHEDULE_DIVISOR: "1000" },
  });
  stack.startWorker({
    DELIVERY: "mx",
    MX_PORT: String(port),
    MX_ALLOW_PRIVATE: "1",
    MX_HELO_NAME: "out.mailcore.test",
    MX_TRUSTED_CA: caFile,
    MX_SHAPING_FILE: shapingFile,
    MX_SETUP_TIMEOUT_MS: "1000",
    MX_REPLY_TIMEOUT_MS: "1500",
    MX_MESSAGE_TIMEOUT_MS: "5000",
    WORKER_METRICS_PORT: String(metricsPort),
  });
  token = await stack.org("mxsender", "enterprise");
});

afterAll(async () => {
  await stack?.stop();
  await Promise.all(stops.map((s) => s()));
});

/** https://mta-sts.<domain>/.well-known/mta-sts.txt on address:443, an enforce policy listing mx. */
async function mtaStsServer(address: string, domain: string, mx: string): Promise<() => Promise<void>> {
  const server: HttpsServer = createHttpsServer(await ca.issue([`mta-sts.${domain}`]), (_req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain" });
    res.end(`version: STSv1\r\nmode: enforce\r\nmx: ${mx}\r\nmax_age: 86400\r\n`);
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(443, address, () => ok());
  });
  return () => new Promise<void>((ok) => server.close(() => ok()));
}

async function send(to: string): Promise<string> {
  const sent = await sendEmail(stack.apiUrls[0]!, token, {
    from: "Acme <no-reply@mxsender.example>",
    to,
    subject: `To ${to}`,
    text: `Hello ${to}`,
  });
  expect(sent.status).toBe(202);
  return sent.body.id as string;
}

async function email(id: string): Promise<EmailView> {
  const res = await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, { headers: { Authorization: `Bearer ${token}` } });
  return (await res.json()) as EmailView;
}

async function until(id: string, done: (e: EmailView) => boolean, what: string, timeoutMs = 15_000) {
  await waitFor(`${id}: ${what}`, async () => done(await email(id)), timeoutMs);
  return email(id);
}
const status = (s: string) => (e: EmailView) => e.status === s;

describe("the route", () => {
  test("MX preference, and the next host when the preferred one refuses the connection", async () => {
    const id = await send("ada@pref.test");
    const done = await until(id, status("delivered"), "delivered");
    expect(done.deliveryAttempts.map((a) => [a.host, a.address, a.stage])).toEqual([
      ["mx1.pref.test", "127.0.0.51", "connect"],
      ["mx2.pref.test", "127.0.0.52", "data"],
    ]);
    expect(preferred.received.filter((r) => r.to === "ada@pref.test")).toHaveLength(1);
    // MAIL FROM: the message's return path at bounces.<its From domain>.
    expect(preferred.received[0]).toMatchObject({ helo: "out.mailcore.test" });
    expect(preferred.received[0]!.from).toMatch(new RegExp(`^${id}-[a-z2-7]{16}@bounces\\.mxsender\\.example$`));
  });

  test("implicit MX: a domain without MX records gets its mail at its own address", async () => {
    const id = await send("bob@implicit.test");
    const done = await until(id, status("delivered"), "delivered");
    expect(done.deliveryAttempts.at(-1)).toMatchObject({ host: "implicit.test", address: "127.0.0.53" });
    expect(implicit.received.map((r) => r.to)).toEqual(["bob@implicit.test"]);
  });

  test("null MX: final at once, one attempt, no connection", async () => {
    const id = await send("cy@nullmx.test");
    const done = await until(id, (e) => e.status === "bounced" || e.status === "failed", "final");
    expect(done.status).toBe("bounced");
    expect(done.attempts).toBe(1);
    expect(done.events.at(-1)!.detail).toContain("null MX");
    expect(done.deliveryAttempts).toEqual([expect.objectContaining({ host: "", stage: "connect" })]);
  });
});

describe("receivers", () => {
  test("greylisting: delivered on a retry after the receiver's delay, exactly once", async () => {
    const id = await send("dee@grey.test");
    const done = await until(id, status("delivered"), "delivered");
    expect(done.attempts).toBeGreaterThanOrEqual(2);
    expect(done.events.map((e) => e.status)).toContain("deferred");
    expect(done.deliveryAttempts[0]).toMatchObject({ stage: "rcpt", enhancedCode: "4.7.1" });
    expect(grey.received.filter((r) => r.to === "dee@grey.test")).toHaveLength(1);
  });

  test("a host that accepts the connection and never greets: deferred at the greeting, retried", async () => {
    const id = await send("eve@silent.test");
    const done = await until(id, (e) => e.attempts >= 2 && e.deliveryAttempts.length >= 2, "tried twice");
    expect(done.deliveryAttempts[0]).toMatchObject({ host: "mx.silent.test", stage: "greeting" });
    expect(["deferred", "sending", "queued"]).toContain(done.status);
  });

  test("a host that stops answering in DATA: deferred within the reply deadline, nothing delivered", async () => {
    const id = await send("fay@stall.test");
    const done = await until(id, (e) => e.deliveryAttempts.length >= 1, "tried");
    expect(done.deliveryAttempts[0]).toMatchObject({ stage: "data" });
    expect(done.deliveryAttempts[0]!.reply).toMatch(/ETIMEDOUT|no complete reply/); // the reply deadline
    expect(stall.received).toHaveLength(0);
  });

  test("a reply line a megabyte long: the connection is dropped, the message deferred", async () => {
    const id = await send("gus@longline.test");
    const done = await until(id, (e) => e.deliveryAttempts.length >= 1, "tried");
    expect(done.deliveryAttempts[0]).toMatchObject({ host: "mx.longline.test", stage: "ehlo" });
    expect(done.status).not.toBe("delivered");
  });

  test("a host that closes after 250 to DATA, before QUIT: delivered, once", async () => {
    const id = await send("hal@closer.test");
    const done = await until(id, status("delivered"), "delivered");
    expect(done.attempts).toBe(1);
    await Bun.sleep(500);
    expect(closerDots).toBe(1);
  });

  test("an expired certificate: opportunistic TLS goes on without checking it", async () => {
    const id = await send("ivy@expired.test");
    const done = await until(id, status("delivered"), "delivered");
    expect(done.deliveryAttempts.at(-1)).toMatchObject({ tls: "unverified", stage: "data" });
    expect(expired.received[0]).toMatchObject({ to: "ivy@expired.test", secure: true });
  });

  test("MTA-STS enforce, the MX without a valid certificate: not delivered, retried", async () => {
    const id = await send("jo@sts.test");
    const done = await until(id, (e) => e.deliveryAttempts.length >= 2, "tried twice");
    expect(done.deliveryAttempts[0]).toMatchObject({ host: "mx.sts.test", stage: "starttls" });
    expect(done.status).not.toBe("delivered");
    expect(sts.received).toHaveLength(0);
  });

  test("the retries end: failed with the last reply", async () => {
    const id = await send("kim@stall.test");
    const done = await until(id, status("failed"), "failed", 30_000);
    expect(done.events.at(-1)!.detail).toStartWith("not delivered 7.2 seconds after its first attempt; the last try:");
    expect(done.attempts).toBeGreaterThanOrEqual(2);
  });
});

test("shaping: a destination limited to 2 connections never sees a third, and 50 messages a connection at most", async () => {
  const ids = await Promise.all(Array.from({ length: 120 }, (_, i) => send(`r${i}@shaped.test`)));
  await waitFor("120 delivered", async () => shaped.received.length >= 120, 30_000);
  expect(shaped.maxOpen()).toBeLessThanOrEqual(2);
  const perConnection = Map.groupBy(shaped.received, (r) => r.connection);
  expect(Math.max(...[...perConnection.values()].map((l) => l.length))).toBeLessThanOrEqual(50);
  expect(perConnection.size).toBeGreaterThanOrEqual(3);
  expect(new Set(shaped.received.map((r) => r.to)).size).toBe(120); // each once
  expect((await email(ids[0]!)).status).toBe("delivered");
});

test("operators see the destinations: the worker's mailcore_mx_* metrics, and admin destinations", async () => {
  const id = await send("lou@silent.test"); // a destination that fails while this test looks
  await until(id, (e) => e.deliveryAttempts.length >= 1, "tried");
  const scrape = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  await waitFor("the failing destination in the metrics", async () =>
    /mailcore_mx_destination_failing_since_seconds\{[^}]*destination="mx.silent.test"[^}]*\} [1-9]/.test(
      await scrape(),
    ),
  );
  expect(await scrape()).toMatch(/mailcore_mx_destination_connections\{[^}]*destination="mx\.[a-z]+\.test"/);
  // Reported every 5 s: the daemon has the worker's report within a few.
  let rows: Record<string, unknown>[] = [];
  await waitFor(
    "admin destinations to list mx.silent.test",
    async () => {
      const out = await stack.admin("destinations", "--json");
      rows = out.stdout
        .trim()
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      return rows.some((r) => r.destination === "mx.silent.test" && Number(r.failingSinceMs) > 0);
    },
    15_000,
  );
  expect(rows.find((r) => r.destination === "mx.silent.test")).toMatchObject({
    rule: "default",
    worker: expect.any(String),
  });
  const people = await stack.admin("destinations");
  expect(people.code).toBe(0);
  expect(people.stdout).toMatch(/mx\.silent\.test +default .*failing since 20\d\d-/);
});
