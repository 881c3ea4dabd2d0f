// SMTP submission end to end over separate processes: limiterd, api, worker and smtp
// (several, for the failure cases), driven by real clients: nodemailer, swaks, and a raw
// line client for what those two will not do.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { simpleParser } from "mailparser";
import { freePort, type SmtpProc, type Stack, startSmtp, startStack, waitFor } from "../testkit/testkit";
import {
  CLIENTS,
  type ClientName,
  type Outcome,
  parseReply,
  RawSmtp,
  type Submission,
  viaNodemailer,
} from "../testkit/smtpclients";

const sinkFile = (stack: Stack, id: string) => join(stack.dataDir, "sink", `${id}.eml`);

async function delivered(stack: Stack, id: string) {
  await waitFor(`${id} in the sink`, async () => existsSync(sinkFile(stack, id)), 10_000);
  return simpleParser(readFileSync(sinkFile(stack, id)));
}

function expectQueued(o: Outcome): string {
  expect(o.failure, o.transcript).toBeUndefined();
  expect(o.queued, o.transcript).toMatchObject({ code: 250, status: "2.0.0" });
  return o.queued!.id;
}

function expectRefused(o: Outcome, code: number, status: string, text?: string | RegExp): void {
  expect(o.failure, o.transcript).toBeDefined();
  expect({ code: o.failure!.code, status: o.failure!.status }, o.transcript).toEqual({ code, status });
  if (text !== undefined) expect(o.failure!.text).toMatch(text);
  expect(o.queued, o.transcript).toBeUndefined();
}

const BAD_TOKEN = `mc_${"Q".repeat(43)}`;
const CLIENT_NAMES = Object.keys(CLIENTS) as ClientName[];

describe("SMTP submission", () => {
  let stack: Stack;
  let smtp: SmtpProc;
  let apiDown: SmtpProc;
  let daemonDown: SmtpProc;
  let tight: SmtpProc;
  let acme: string;
  let thrifty: string;
  const tokens: string[] = [];

  beforeAll(async () => {
    stack = await startStack({ env: { LANE_RATE: "1000" } });
    stack.startWorker({ WORKER_CONCURRENCY: "64" });
    [acme, thrifty] = await Promise.all([stack.org("acme", "enterprise"), stack.org("thrifty", "free")]);
    tokens.push(acme, thrifty);
    await stack.admin("domain", "add", "acme", "unverified.example");
    [smtp, apiDown, daemonDown, tight] = await Promise.all([
      // These tests fail AUTH on purpose and open 50 sessions at once, all from 127.0.0.1; the
      // per-address limits have their own test (abuse_process.test.ts).
      startSmtp(stack, { SMTP_AUTH_FAILURES_PER_IP: "1000", SMTP_MAX_CLIENTS_PER_IP: "100" }),
      startSmtp(stack, { API_URL: `http://127.0.0.1:${await freePort()}` }),
      startSmtp(stack, { LIMITER_URL: `http://127.0.0.1:${await freePort()}` }),
      startSmtp(stack, { SMTP_SOCKET_TIMEOUT_MS: "800", SMTP_SESSION_TIMEOUT_MS: "2500", SMTP_MAX_CLIENTS: "3" }),
    ]);
  }, 40_000);

  afterAll(async () => {
    await Promise.all([smtp, apiDown, daemonDown, tight].map((s) => s?.proc.stop("SIGKILL")));
    await stack?.stop();
  });

  const base = (client: ClientName, extra: Partial<Submission> = {}): Submission => ({
    port: smtp.port,
    user: "acme",
    pass: acme,
    mailFrom: "bounces@acme.example",
    to: [`jane-${client}@dest.example`],
    from: "Acme <no-reply@acme.example>",
    subject: `Your code (${client})`,
    text: "Your code is **123456**.",
    ...extra,
  });

  describe.each(CLIENT_NAMES)("with %s", (client) => {
    const send = CLIENTS[client];

    test("250: a text message reaches the sink as Markdown with its From, in the transactional lane", async () => {
      const id = expectQueued(await send(base(client)));
      const mail = await delivered(stack, id);
      expect(mail.from?.value[0]).toEqual({ name: "Acme", address: "no-reply@acme.example" });
      expect(mail.to && !Array.isArray(mail.to) ? mail.to.value[0]!.address : "").toBe(`jane-${client}@dest.example`);
      expect(mail.subject).toBe(`Your code (${client})`);
      expect(mail.html).toContain("<strong>123456</strong>");
      const view = await (
        await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, { headers: { Authorization: `Bearer ${acme}` } })
      ).json();
      expect(view).toMatchObject({ id, lane: "transactional" });
    });

    test("250: an HTML message keeps its HTML", async () => {
      const id = expectQueued(
        await send(
          base(client, {
            to: [`html-${client}@dest.example`],
            html: '<p>Click <a href="https://acme.example/x">here</a></p>',
            text: "Click here",
          }),
        ),
      );
      const mail = await delivered(stack, id);
      expect(mail.html).toContain('<p>Click <a href="https://acme.example/x">here</a></p>');
      expect(mail.text?.trim()).toBe("Click here");
      expect(mail.from?.text).toContain("no-reply@acme.example");
    });

    test("535 5.7.8: a bad token", async () => {
      expectRefused(await send(base(client, { pass: BAD_TOKEN })), 535, "5.7.8", /API token is not valid/);
      expectRefused(await send(base(client, { pass: "hunter2" })), 535, "5.7.8", /must be an API token/);
    });

    test("530 5.7.0: no AUTH", async () => {
      expectRefused(await send(base(client, { user: undefined })), 530, "5.7.0", /Authentication required/);
    });

    test("AUTH before STARTTLS: not offered, not accepted", async () => {
      const o = await send(base(client, { tls: false }));
      expect(o.queued).toBeUndefined();
      if (client === "swaks") expect(o.failure?.text).toContain("did not advertise authentication");
      else expectRefused(o, 530, "5.7.0", /STARTTLS/); // nodemailer skips AUTH when it is not offered
    });

    test("452 4.5.3: a second recipient (the first one is sent)", async () => {
      const o = await send(base(client, { to: [`one-${client}@dest.example`, `two-${client}@dest.example`] }));
      expect(o.failure).toMatchObject({ code: 452, status: "4.5.3" });
      const mail = await delivered(stack, o.queued!.id);
      expect(mail.to && !Array.isArray(mail.to) ? mail.to.value.map((a) => a.address) : []).toEqual([
        `one-${client}@dest.example`,
      ]);
    });

    test("552 5.6.0: an attachment", async () => {
      expectRefused(
        await send(base(client, { attachments: [{ filename: "invoice.pdf", content: "%PDF-1.4 fake" }] })),
        552,
        "5.6.0",
        /Attachments are not accepted/,
      );
    });

    test("552 5.3.4: 1 MB + 1 byte", async () => {
      const head = `From: no-reply@acme.example\r\nTo: big@dest.example\r\nSubject: big\r\nMessage-ID: <big-${client}@acme.example>\r\n\r\n`;
      const line = `${"x".repeat(76)}\r\n`;
      const size = 1024 * 1024 + 1;
      const body = line.repeat(Math.ceil(size / line.length)).slice(0, size - head.length - 2);
      const raw = `${head}${body}\r\n`;
      expect(Buffer.byteLength(raw)).toBe(size);
      // nodemailer announces SIZE= and is refused at MAIL; swaks is not and is refused on the stream.
      expectRefused(await send(base(client, { raw })), 552, "5.3.4", /1048576/);
    });

    test("550 5.7.1: a From on a domain that is not verified", async () => {
      expectRefused(
        await send(base(client, { from: "x@unverified.example" })),
        550,
        "5.7.1",
        /unverified\.example is not a verified sending domain/,
      );
      expectRefused(
        await send(base(client, { from: "x@globex.example" })),
        550,
        "5.7.1",
        /not a verified sending domain/,
      );
    });

    test("452 4.2.1: the 6th message to one mailbox within 10 minutes", async () => {
      const to = [`guarded-${client}@dest.example`];
      for (let i = 0; i < 5; i++) expectQueued(await send(base(client, { to, subject: `code ${i}` })));
      expectRefused(
        await send(base(client, { to, subject: "code 6" })),
        452,
        "4.2.1",
        /temporarily rate limited.*retry in (59\d|600) s/,
      ); // less the time the five sends took
    });

    test("452 4.7.0: the organization's quota is used up", async () => {
      // Keep the free organization's bucket (100/min: a token every 600 ms) empty while the
      // client sends: two drainers take each token within a request's time of its arrival.
      let draining = true;
      let limited = false;
      const drainer = async () => {
        while (draining) {
          const res = await fetch(`${stack.apiUrls[0]}/api/v1/tags`, {
            headers: { Authorization: `Bearer ${thrifty}` },
          });
          if (res.status === 429) limited = true;
        }
      };
      const drain = Promise.all([drainer(), drainer()]);
      try {
        await waitFor("the quota to be used up", async () => limited);
        // A send that lands in the instant a token came back is rightly queued; the next one is
        // refused. Three sends that all found a token would mean the quota does not hold.
        let o: Awaited<ReturnType<typeof send>> | undefined;
        for (let attempt = 0; attempt < 3 && !o?.failure; attempt++)
          o = await send(base(client, { user: "thrifty", pass: thrifty, from: "no-reply@thrifty.example" }));
        expectRefused(o!, 452, "4.7.0", /"free" plan allows 100 API requests per minute; retry in \d+ s/);
      } finally {
        draining = false;
        await drain;
      }
    });

    test("451 4.4.1: the API is down", async () => {
      expectRefused(
        await send(base(client, { port: apiDown.port })),
        451,
        "4.4.1",
        /HTTP API is temporarily unavailable/,
      );
    });

    test("451 4.7.0 at AUTH: the daemon is down", async () => {
      expectRefused(await send(base(client, { port: daemonDown.port })), 451, "4.7.0", /rate limiter is unavailable/);
    });
  });

  test("AUTH in cleartext: not in EHLO, refused with a 5xx; MAIL gets 530 5.7.0", async () => {
    const c = await RawSmtp.connect(smtp.port);
    try {
      const ehlo = await c.greetingAndEhlo();
      expect(ehlo).toContain("STARTTLS");
      expect(ehlo).not.toContain("AUTH");
      expect(ehlo).toContain("SIZE 1048576");
      const auth = await c.cmd(`AUTH PLAIN ${Buffer.from(`\0acme\0${acme}`).toString("base64")}`);
      expect(auth).toMatch(/^5\d\d 5\.\d\.\d /);
      expect(await c.cmd("MAIL FROM:<a@acme.example>")).toStartWith(
        "530 5.7.0 Authentication required: STARTTLS, then AUTH",
      );
      // After STARTTLS it is offered.
      await c.starttls();
      expect(await c.cmd("EHLO raw.test")).toContain("AUTH PLAIN LOGIN");
    } finally {
      c.destroy();
    }
  });

  test("a missing username is 535 5.7.8; the third failed AUTH closes the connection", async () => {
    const c = await RawSmtp.connect(smtp.port);
    try {
      expect(await c.login("", acme)).toStartWith("535 5.7.8 Authentication failed: a username is required");
      expect(await c.cmd(`AUTH PLAIN ${Buffer.from(`\0acme\0${BAD_TOKEN}`).toString("base64")}`)).toStartWith(
        "535 5.7.8",
      );
      expect(await c.cmd(`AUTH PLAIN ${Buffer.from(`\0acme\0${BAD_TOKEN}`).toString("base64")}`)).toStartWith(
        "535 5.7.8 Authentication failed: the API token is not valid (unknown or revoked); 3 failed attempts, closing the connection",
      );
      await c.closed;
    } finally {
      c.destroy();
    }
  });

  test("a retry of the same message (same Message-ID and envelope) is not queued twice", async () => {
    const raw =
      "From: no-reply@acme.example\r\nTo: retry@dest.example\r\nSubject: once\r\nMessage-ID: <retry-1@acme.example>\r\n\r\nHello\r\n";
    const s = { ...base("nodemailer", { to: ["retry@dest.example"] }), raw };
    const first = expectQueued(await viaNodemailer(s));
    const again = await viaNodemailer(s);
    expect(again.queued).toMatchObject({ id: first });
    expect(again.queued!.text).toStartWith("Already queued as");
  });

  test("exactly 1 MB (a base64 body, so that the decoded JSON fits the API) is accepted", async () => {
    const head =
      "From: no-reply@acme.example\r\nTo: exact@dest.example\r\nSubject: exact\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n";
    let rest = 1024 * 1024 - head.length;
    const lines: string[] = [];
    while (rest >= 80) {
      lines.push(`${"QUJD".repeat(19)}\r\n`);
      rest -= 78;
    }
    lines.push(`${"QUJD".repeat(20).slice(0, rest - 2)}\r\n`);
    const message = Buffer.from(head + lines.join(""));
    expect(message.length).toBe(1024 * 1024);
    expectQueued(await viaNodemailer({ ...base("nodemailer", { to: ["exact@dest.example"] }), raw: message }));
  });

  test("50 concurrent sessions, one message each: all accepted, none lost, none duplicated", async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        viaNodemailer(base("nodemailer", { to: [`conc-${i}@dest.example`], subject: `concurrent ${i}` })),
      ),
    );
    const ids = outcomes.map((o) => expectQueued(o));
    expect(new Set(ids).size).toBe(50);
    await waitFor("all 50 in the sink", async () => ids.every((id) => existsSync(sinkFile(stack, id))), 15_000);
    const recipients = readdirSync(join(stack.dataDir, "sink"))
      .filter((f) => f.endsWith(".eml"))
      .map((f) => /^To: (conc-\d+@dest\.example)$/m.exec(readFileSync(join(stack.dataDir, "sink", f), "utf8"))?.[1])
      .filter((r) => r !== undefined);
    expect(recipients.sort()).toEqual(Array.from({ length: 50 }, (_, i) => `conc-${i}@dest.example`).sort());
  }, 30_000);

  describe("hostile and broken input: clear replies, no crash, nothing half-queued", () => {
    const rawSend = (raw: string | Buffer, to = "odd@dest.example") =>
      viaNodemailer({ ...base("nodemailer", { to: [to] }), raw });

    test("malformed MIME", async () => {
      // A multipart message whose closing boundary never comes: the text part is what there is.
      const unterminated =
        'From: no-reply@acme.example\r\nSubject: broken\r\nContent-Type: multipart/alternative; boundary="zz"\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nstill readable\r\n--zz\r\nContent-Type: text/html\r\n';
      const id = expectQueued(await rawSend(unterminated, "mime1@dest.example"));
      expect((await delivered(stack, id)).text).toContain("still readable");
      // No header block at all.
      expectRefused(await rawSend("\x01\x02 this is not a message\r\n::::\r\n"), 550, "5.6.0", /no From header/);
      // A boundary that is empty, a Content-Type that is garbage.
      expectRefused(
        await rawSend(
          "From: no-reply@acme.example\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=\r\n\r\n--\r\n--\r\n",
        ),
        550,
        "5.6.0",
        /no text or HTML body/,
      );
      const garbageType = await rawSend(
        "From: no-reply@acme.example\r\nSubject: s\r\nContent-Type: ;;;/\r\n\r\nbody\r\n",
        "mime2@dest.example",
      );
      expectQueued(garbageType);
    });

    test("8-bit and non-UTF-8 headers", async () => {
      const utf8 = expectQueued(
        await rawSend(
          Buffer.from('From: "Zoë" <no-reply@acme.example>\r\nSubject: Grüße ✓\r\n\r\nHallo\r\n'),
          "utf8@dest.example",
        ),
      );
      const u = await delivered(stack, utf8);
      expect(u.subject).toBe("Grüße ✓");
      expect(u.from?.value[0]?.name).toBe("Zoë");
      const latin1 = Buffer.concat([
        Buffer.from("From: no-reply@acme.example\r\nSubject: Gr"),
        Buffer.from([0xfc, 0xdf]),
        Buffer.from("e\r\nX-Note: caf"),
        Buffer.from([0xe9, 0xff]),
        Buffer.from("\r\n\r\nbody\r\n"),
      ]);
      const l = await delivered(stack, expectQueued(await rawSend(latin1, "latin1@dest.example")));
      expect(l.subject).toBe("Grüße");
      expect(l.headers.get("x-note")).toBe("=?UTF-8?Q?caf=C3=A9=C3=BF?="); // "caféÿ", as the worker encodes it
    });

    test("very long lines", async () => {
      const longBody = "y".repeat(300_000);
      const id = expectQueued(
        await rawSend(
          `From: no-reply@acme.example\r\nSubject: long\r\nX-Long: ${"h".repeat(5_000)}\r\n\r\n${longBody}\r\n`,
          "long@dest.example",
        ),
      );
      const mail = await delivered(stack, id);
      expect(mail.html).toContain(longBody);
      expect(mail.headers.get("x-long")).toBeUndefined(); // over the 998 characters a header line may have
      expectRefused(
        await rawSend(`From: no-reply@acme.example\r\nSubject: ${"s".repeat(2_000)}\r\n\r\nx\r\n`),
        550,
        "5.6.0",
        /subject: must be at most 998 characters/,
      );
      // A command line of 20 KB: the connection is closed with a 421, the server lives on.
      const c = await RawSmtp.connect(smtp.port);
      await c.greetingAndEhlo();
      expect(parseReply(await c.cmd(`NOOP ${"n".repeat(20_000)}`))?.code).toBe(421);
      await c.closed;
      expectQueued(
        await rawSend("From: no-reply@acme.example\r\nSubject: after\r\n\r\nstill up\r\n", "still-up@dest.example"),
      );
    });

    test("a client that stalls mid-DATA, and one that hangs up mid-DATA: nothing queued", async () => {
      for (const how of ["stall", "hangup"] as const) {
        const c = await RawSmtp.connect(tight.port);
        expect(await c.login("acme", acme)).toStartWith("235 ");
        expect(await c.cmd("MAIL FROM:<b@acme.example>")).toStartWith("250 ");
        expect(await c.cmd(`RCPT TO:<${how}@dest.example>`)).toStartWith("250 ");
        expect(await c.cmd("DATA")).toStartWith("354 ");
        c.write(`From: no-reply@acme.example\r\nSubject: ${how}\r\n\r\nhalf a mess`);
        if (how === "stall") {
          expect(await c.read(5_000)).toStartWith("421 4.4.2");
          await c.closed;
        } else {
          await Bun.sleep(100);
          c.destroy();
        }
      }
      // The tight front still serves, and a message queued after them is delivered alone.
      const id = expectQueued(
        await viaNodemailer({ ...base("nodemailer", { to: ["after-stall@dest.example"] }), port: tight.port }),
      );
      await delivered(stack, id);
      const leaked = readdirSync(join(stack.dataDir, "sink")).filter((f) =>
        /^To: (stall|hangup)@/m.test(readFileSync(join(stack.dataDir, "sink", f), "utf8")),
      );
      expect(leaked).toEqual([]);
      expect(tight.proc.stderr()).toContain('"reason":"The message was not received in full; nothing was queued"');
    });

    test("at most SMTP_MAX_CLIENTS connections; an idle one is cut; a session has a time limit", async () => {
      const held = await Promise.all([0, 1, 2].map(() => RawSmtp.connect(tight.port)));
      for (const c of held) await c.read();
      const extra = await RawSmtp.connect(tight.port);
      expect(await extra.read()).toMatch(/^421 .*Too many connected clients/);
      await extra.closed;
      // Idle past SMTP_SOCKET_TIMEOUT_MS: 421 4.4.2.
      expect(await held[0]!.read(3_000)).toStartWith("421 4.4.2");
      for (const c of held) c.destroy();
      // Busy but past SMTP_SESSION_TIMEOUT_MS: 421 4.4.2 as well.
      const busy = await RawSmtp.connect(tight.port);
      await busy.greetingAndEhlo();
      const started = Date.now();
      let last = "";
      while (Date.now() - started < 6_000) {
        last = await busy.cmd("NOOP").catch((e: Error) => e.message);
        if (!last.startsWith("250")) break;
        await Bun.sleep(300);
      }
      expect(last).toStartWith("421 4.4.2 Session time limit reached");
      busy.destroy();
    }, 15_000);
  });

  test("no log line of the smtp processes holds a token", () => {
    for (const p of [smtp, apiDown, daemonDown, tight]) {
      for (const t of tokens) expect(p.proc.stderr()).not.toContain(t);
      expect(p.proc.stderr()).not.toContain("mc_");
    }
    expect(smtp.proc.proc.exitCode).toBeNull(); // and it is still running
  });
});
