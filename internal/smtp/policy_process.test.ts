// The SMTP front's connection policy from the side of a legitimate sender: an application
// fleet behind one address is bounded by its organization, not by the address; the greeting
// comes at once; the early-talker check stays for addresses with failed AUTH attempts.
// 127.0.0.x addresses play the clients, one per test.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CLIENTS, type ClientName, parseReply, RawSmtp, viaNodemailer } from "../testkit/smtpclients";
import { type SmtpProc, type Stack, startSmtp, startStack, waitFor } from "../testkit/testkit";

const BAD_TOKEN = `mc_${"Q".repeat(43)}`;

describe("SMTP connection policy", () => {
  let stack: Stack;
  let acme: string;
  let globex: string;
  /** The default limits, as a new user runs it. */
  let smtp: SmtpProc;
  /** At most 3 authenticated sessions per organization. */
  let orgCapped: SmtpProc;

  beforeAll(async () => {
    // A busy machine (a hundred TLS sessions at once on two cores) must not turn a token
    // check or the API's call to the limiter into a 451.
    stack = await startStack({ env: { LANE_RATE: "1000", LIMITER_TIMEOUT_MS: "5000" } });
    stack.startWorker({ WORKER_CONCURRENCY: "64" });
    [acme, globex] = await Promise.all([stack.org("acme", "enterprise"), stack.org("globex", "enterprise")]);
    const timeout = { LIMITER_TIMEOUT_MS: stack.env.LIMITER_TIMEOUT_MS! };
    [smtp, orgCapped] = await Promise.all([
      startSmtp(stack, timeout),
      startSmtp(stack, { ...timeout, SMTP_MAX_SESSIONS_PER_ORG: "3" }),
    ]);
  }, 40_000);

  afterAll(async () => {
    await Promise.all([smtp, orgCapped].map((s) => s?.proc.stop("SIGKILL")));
    await stack?.stop();
  });

  const sinkDir = () => join(stack.dataDir, "sink");

  test.each([
    ["swaks", 30, "127.0.0.4"],
    ["nodemailer", 100, "127.0.0.5"],
  ] as [ClientName, number, string][])(
    "%s: %d concurrent authenticated sessions from one address are all accepted and each delivered once",
    async (client, n, address) => {
      const outcomes = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          CLIENTS[client]({
            port: smtp.port,
            localAddress: address,
            user: "acme",
            pass: acme,
            mailFrom: "bounces@acme.example",
            to: [`fleet${n}-${i}@dest.example`],
            from: "no-reply@acme.example",
            subject: `Fleet ${i}`,
            text: "From one address of many senders.",
          }),
        ),
      );
      for (const o of outcomes) expect(o.failure, o.transcript).toBeUndefined();
      const ids = outcomes.map((o) => o.queued?.id);
      expect(ids.every((id) => id !== undefined)).toBe(true);
      expect(new Set(ids).size).toBe(n);
      await waitFor(
        `${n} messages in the sink`,
        async () => ids.every((id) => existsSync(join(sinkDir(), `${id}.eml`))),
        30_000,
      );
      const recipient = new RegExp(`^To: fleet${n}-\\d+@`, "m");
      const files = readdirSync(sinkDir()).filter((f) => recipient.test(readFileSync(join(sinkDir(), f), "utf8")));
      expect(files).toHaveLength(n);
    },
    90_000,
  );

  test("421 4.7.0 at AUTH once the organization holds SMTP_MAX_SESSIONS_PER_ORG sessions; another organization is served", async () => {
    const held = await Promise.all([0, 1, 2].map(() => RawSmtp.connect(orgCapped.port, "127.0.0.6")));
    try {
      for (const c of held) expect(await c.login("acme", acme)).toStartWith("235 ");
      const extra = await RawSmtp.connect(orgCapped.port, "127.0.0.6");
      expect(parseReply(await extra.login("acme", acme))).toMatchObject({
        code: 421,
        status: "4.7.0",
        text: expect.stringContaining("Too many sessions for your organization (at most 3 authenticated at once)"),
      });
      await extra.closed;

      const other = await viaNodemailer({
        port: orgCapped.port,
        localAddress: "127.0.0.6",
        user: "globex",
        pass: globex,
        mailFrom: "bounces@globex.example",
        to: ["someone@dest.example"],
        from: "no-reply@globex.example",
        subject: "Hi",
        text: "another organization",
      });
      expect(other.failure, other.transcript).toBeUndefined();
      expect(other.queued?.code).toBe(250);

      // A session that closes gives its organization's slot back.
      expect(await held[0]!.cmd("QUIT")).toStartWith("221");
      await held[0]!.closed;
      await waitFor(
        "a free slot for acme",
        async () => {
          const again = await RawSmtp.connect(orgCapped.port, "127.0.0.6");
          try {
            return (await again.login("acme", acme)).startsWith("235 ");
          } finally {
            again.destroy();
          }
        },
        5_000,
      );
    } finally {
      for (const c of held) c.destroy();
    }
  }, 30_000);

  test("the greeting comes at once: median of 100 connections", async () => {
    const ms: number[] = [];
    for (let i = 0; i < 100; i++) {
      const started = performance.now();
      const c = await RawSmtp.connect(smtp.port, "127.0.0.7");
      try {
        expect(await c.read()).toStartWith("220 ");
        ms.push(performance.now() - started);
      } finally {
        c.destroy();
      }
    }
    ms.sort((a, b) => a - b);
    const median = (ms[49]! + ms[50]!) / 2;
    console.log(`SMTP greeting: median ${median.toFixed(2)} ms, 90th percentile ${ms[89]!.toFixed(2)} ms`);
    expect(median).toBeLessThan(10);
  }, 30_000);

  test("an early talker from an address with failed AUTH attempts is refused; waiting for the greeting is served", async () => {
    const guesser = await RawSmtp.connect(smtp.port, "127.0.0.8");
    try {
      expect(await guesser.login("acme", BAD_TOKEN)).toStartWith("535 ");
    } finally {
      guesser.destroy();
    }
    const talker = await RawSmtp.connect(smtp.port, "127.0.0.8");
    talker.write("EHLO early.test\r\n");
    expect(await talker.read()).toMatch(/^421 .*You talk too soon/);
    await talker.closed;

    const patient = await RawSmtp.connect(smtp.port, "127.0.0.8");
    try {
      expect(await patient.read()).toStartWith("220 ");
      expect(await patient.cmd("EHLO patient.test")).toStartWith("250");
    } finally {
      patient.destroy();
    }
  }, 30_000);

  test("an early talker waiting for a slot of its address is refused", async () => {
    // The address holds its 10 unauthenticated sessions (SMTP_MAX_CLIENTS_PER_IP's default).
    const holding = await Promise.all(Array.from({ length: 10 }, () => RawSmtp.connect(smtp.port, "127.0.0.9")));
    try {
      for (const c of holding) expect(await c.read()).toStartWith("220 ");
      const talker = await RawSmtp.connect(smtp.port, "127.0.0.9");
      talker.write("EHLO early.test\r\n");
      expect(await talker.read()).toMatch(/^421 .*You talk too soon/);
      await talker.closed;
    } finally {
      for (const c of holding) c.destroy();
    }
  }, 30_000);
});
