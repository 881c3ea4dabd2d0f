// The SMTP front under abuse from one address: idle connections that once locked everyone
// out, and AUTH guessing at 19 tries a second over fresh connections.
// 127.0.0.2 plays the abuser, 127.0.0.1 the legitimate client.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { freePort, runBun, type Stack, startStack, waitFor } from "../testkit/testkit";
import { parseReply, RawSmtp, viaNodemailer } from "../testkit/smtpclients";

/** One abusing address per test, so that one test's connections do not count against the other's. */
const IDLE_ABUSER = "127.0.0.2";
const GUESSING_ABUSER = "127.0.0.3";
const BAD_TOKEN = `mc_${"Q".repeat(43)}`;

describe("one address abusing the SMTP front", () => {
  let stack: Stack;
  let token: string;
  let port: number;
  let smtp: ReturnType<typeof runBun>;
  beforeAll(async () => {
    stack = await startStack({ workers: 1 });
    token = await stack.org("acme", "enterprise");
    port = await freePort();
    smtp = runBun("cmd/smtp/index.ts", [], {
      DATA_DIR: stack.dataDir,
      LIMITER_URL: stack.limiterUrl,
      API_URL: stack.apiUrls[0]!,
      SMTP_PORT: String(port),
      SMTP_MAX_CLIENTS: "20",
      SMTP_MAX_CLIENTS_PER_IP: "5",
      SMTP_AUTH_TIMEOUT_MS: "2000",
      // A busy machine must not turn the legitimate client's token check into a 451.
      LIMITER_TIMEOUT_MS: "5000",
    });
    await waitFor("smtp", async () => smtp.stderr().includes('"msg":"listening"'), 15_000);
  }, 40_000);
  afterAll(async () => {
    await smtp?.stop("SIGKILL");
    await stack?.stop();
  });

  const legit = (to: string) =>
    viaNodemailer({
      port,
      user: "acme",
      pass: token,
      mailFrom: "bounces@acme.example",
      to: [to],
      from: "no-reply@acme.example",
      subject: "Hi",
      text: "legit",
    });

  test("30 idle connections from one address: that address is capped, another is served, and idle ones are closed before AUTH", async () => {
    const idle = await Promise.all(Array.from({ length: 30 }, () => RawSmtp.connect(port, IDLE_ABUSER)));
    try {
      await checkIdleConnections(idle);
    } finally {
      for (const c of idle) c.destroy();
    }
  }, 40_000);

  async function checkIdleConnections(idle: RawSmtp[]) {
    const greetings = await Promise.all(idle.map((c) => c.read(10_000).catch((e: Error) => e.message)));
    const served = greetings.filter((g) => g.startsWith("220"));
    const capped = greetings.map((g) => parseReply(g)).filter((r) => r?.code === 421);
    expect(served).toHaveLength(5);
    expect(capped).toHaveLength(25);
    expect(capped[0]).toMatchObject({
      status: "4.7.0",
      text: expect.stringContaining("Too many connections from your address"),
    });

    const o = await legit("one@dest.example");
    expect(o.failure, o.transcript).toBeUndefined();
    expect(o.queued?.code).toBe(250);

    // The five that were let in, idle without AUTH, are closed after SMTP_AUTH_TIMEOUT_MS.
    const started = Date.now();
    const last = await Promise.all(idle.filter((_, i) => greetings[i]!.startsWith("220")).map((c) => c.read(10_000)));
    expect(Date.now() - started).toBeLessThan(8_000);
    for (const r of last) expect(parseReply(r)).toMatchObject({ code: 421, status: "4.4.2" });
  }

  test("failed AUTH from one address across connections is slowed, then refused; other addresses are not", async () => {
    const replies: string[] = [];
    const started = Date.now();
    for (let i = 0; i < 16; i++) {
      const c = await RawSmtp.connect(port, GUESSING_ABUSER);
      try {
        const greeting = await c.read(10_000);
        if (!greeting.startsWith("220")) {
          replies.push(greeting);
          continue;
        }
        await c.cmd("EHLO raw.test");
        await c.starttls();
        await c.cmd("EHLO raw.test");
        c.write(`AUTH PLAIN ${Buffer.from(`\0acme\0${BAD_TOKEN}`).toString("base64")}\r\n`);
        replies.push(await c.read(15_000));
      } finally {
        c.destroy();
      }
    }
    const elapsedMs = Date.now() - started;
    const failed = replies.filter((r) => r.startsWith("535"));
    const refused = replies.map((r) => parseReply(r)).filter((r) => r?.code === 421);
    expect(failed.length).toBeLessThanOrEqual(10);
    expect(refused.length).toBeGreaterThanOrEqual(6);
    expect(refused[0]).toMatchObject({ status: "4.7.0", text: expect.stringContaining("failed AUTH attempts") });
    // Slowed before being refused: the failures past the third waited (250 ms, doubling).
    expect(elapsedMs).toBeGreaterThan(2_000);

    // The legitimate address still authenticates and sends.
    const o = await legit("two@dest.example");
    expect(o.failure, o.transcript).toBeUndefined();
    expect(o.queued?.code).toBe(250);
  }, 60_000);
});
