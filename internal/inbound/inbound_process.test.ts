// The inbound MX as it runs: cmd/inbound against limiterd and the API (started with `bun run`),
// fed by a private, real Postfix (testkit/postfix.ts) that relays the platform's messages to a
// receiver of this test that refuses them, and sends its DSNs to each message's return path,
// which the test makes as the daemon does (returnPathFor under masterKey.derive("return-path")).
// Each DSN is tied to its message; a hard bounce puts the mailbox on the spec's cooldown and on
// the sending organization's suppression list, a content refusal on neither. Then RFC 5965's
// ARF example, made to report one of the platform's messages, sent to the feedback-loop
// address; forged and altered return paths, unreadable reports, and reports naming no message
// of ours. Prints how many DSNs were tied and how long each took from its arrival to its
// cooldown in effect. The DSNs' messages are delivered first (a worker into the file sink): each
// DSN turns its message from delivered to bounced or failed, in its history.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createTransport } from "nodemailer";
import { readMasterKeyFile } from "../dkim/seal";
import { returnPathFor } from "../returnpath/returnpath";
import { type Postfix, startPostfix } from "../testkit/postfix";
import { type SmtpSink, startSmtpSink } from "../testkit/smtpsink";
import {
  getJson,
  type InboundProc,
  type Stack,
  sendEmail,
  startInbound,
  startStack,
  waitFor,
} from "../testkit/testkit";

const FBL = "fbl@feedback.test";
const INBOUND_HOST = "127.0.0.3";

/** What the refusing receiver answers after DATA, by the recipient's local part. */
const AT_DATA: Record<string, { code: number; text: string }> = {
  unknown: { code: 550, text: "5.1.1 The email account that you tried to reach does not exist" },
  gone: { code: 550, text: "5.2.1 The email account that you tried to reach is disabled" },
  full: { code: 552, text: "5.2.2 The user's mailbox is full" },
  spam: { code: 554, text: "5.7.1 Message rejected as spam" },
  bare: { code: 550, text: "User unknown" },
};
const AT_RCPT: Record<string, { code: number; text: string }> = {
  "rcpt-unknown": { code: 550, text: "5.1.1 No such user here" },
};
const localPart = (address: string) => address.split("@")[0]!;

/** The cases: the recipient, and whether its bounce is the mailbox's fault (cooldown and suppression). */
const CASES: [string, "hard" | "soft" | "policy"][] = [
  ["unknown@remote.test", "hard"],
  ["gone@remote.test", "hard"],
  ["rcpt-unknown@remote.test", "hard"],
  ["bare@remote.test", "hard"],
  ["full@remote.test", "soft"],
  ["spam@remote.test", "policy"],
];

let stack: Stack;
let postfix: Postfix;
let remote: SmtpSink;
let inbound: InboundProc;
let key: Buffer;
let acme: string;
let beta: string;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  acme = await stack.org("acme", "enterprise");
  beta = await stack.org("beta", "enterprise");
  key = readMasterKeyFile(join(stack.dataDir, "dkim-master.key")).derive("return-path");
  remote = await startSmtpSink({
    host: "127.0.0.2",
    atRcpt: (rcpt) => AT_RCPT[localPart(rcpt)],
    atData: (rcptTo) => AT_DATA[localPart(rcptTo[0]!)],
  });
  inbound = await startInbound(stack, INBOUND_HOST, { FBL_ADDRESS: FBL });
  postfix = await startPostfix({
    routes: {
      "remote.test": { host: remote.host, port: remote.port },
      "bounces.acme.example": { host: INBOUND_HOST, port: inbound.port },
    },
  });
}, 90_000);

afterAll(async () => {
  await postfix?.stop();
  await inbound?.proc.stop();
  await remote?.stop();
  await stack?.stop();
});

/** A message of acme's through the API: its id, once the records have it. */
async function accepted(to: string, lane = "transactional"): Promise<string> {
  const sent = await sendEmail(stack.apiUrls[0]!, acme, {
    from: "app@acme.example",
    to,
    subject: "s",
    text: "t",
    lane,
  });
  expect(sent.status).toBe(202);
  const id = sent.body.id as string;
  // The activity log reads the records (GET /api/v1/emails/{id} reads the hot store first).
  await waitFor(`${id} in the records`, async () => {
    const page = await getJson(`${stack.apiUrls[0]}/api/v1/emails?limit=100`, acme);
    return (page.body.data as { id: string }[]).some((m) => m.id === id);
  });
  return id;
}

const api = async (token: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

/** One message straight to the inbound MX; the reply to RCPT or DATA. */
async function toInbound(rcpt: string, raw: string, from = ""): Promise<string> {
  const transport = createTransport({ host: INBOUND_HOST, port: inbound.port, secure: false, ignoreTLS: true });
  try {
    const info = await transport.sendMail({ envelope: { from, to: [rcpt] }, raw });
    return info.response;
  } catch (err) {
    return (err as Error & { response?: string }).response ?? (err as Error).message;
  } finally {
    transport.close();
  }
}

test("DSNs from a real Postfix: each tied to its message by its return path; hard bounces cooled and suppressed, content refusals not", async () => {
  const ids: string[] = [];
  for (const [to] of CASES) ids.push(await accepted(to, "bulk"));
  // Delivered first (into the file sink), as a receiver that said 250 and bounced later: a
  // worker for these only, and the records hold them delivered before the DSNs come.
  const worker = stack.startWorker();
  await waitFor(
    "the messages delivered in the records",
    async () => {
      const page = await getJson(`${stack.apiUrls[0]}/api/v1/emails?status=delivered&limit=100`, acme);
      return ids.every((id) => (page.body.data as { id: string }[]).some((m) => m.id === id));
    },
    30_000,
  );
  await worker.stop();
  const transport = createTransport({ host: postfix.host, port: postfix.port, secure: false, ignoreTLS: true });
  for (const [i, [to]] of CASES.entries()) {
    const id = ids[i]!;
    await transport.sendMail({
      envelope: { from: returnPathFor(id, "acme.example", key), to: [to] },
      messageId: `<${id}@acme.example>`,
      from: "Acme <app@acme.example>",
      to,
      subject: `case ${i}`,
      text: `case ${i}`,
    });
  }
  transport.close();
  await waitFor(
    `${CASES.length} reports at the inbound MX`,
    async () => inbound.reports().length >= CASES.length,
    60_000,
  ).catch((err) => {
    throw new Error(`${err.message}; got ${inbound.reports().length}\n${inbound.proc.stderr()}\n${postfix.log()}`);
  });
  const lines = inbound.reports();
  const tied = lines.filter((l) => l.reply === "250 2.0.0" && ids.some((id) => l.said === `Applied to ${id}`));
  const ms = lines.map((l) => l.ms).sort((a, b) => a - b);
  console.log(
    `DSNs tied to their message: ${tied.length} of ${CASES.length}; from a DSN's arrival (end of DATA) to its cooldown in effect (the daemon's answer): min ${ms[0]} ms, median ${ms[Math.floor(ms.length / 2)]} ms, max ${ms.at(-1)} ms`,
  );
  expect(tied).toHaveLength(CASES.length);

  // The spec's cooldown is the mailbox's: another organization's transactional send is refused
  // for a hard bounce only, at once after the DSN was answered.
  for (const [to, type] of CASES) {
    const b = await sendEmail(stack.apiUrls[0]!, beta, { from: "app@beta.example", to, subject: "s", text: "t" });
    expect({ to, status: b.status }).toEqual({ to, status: type === "hard" ? 429 : 202 });
  }
  const listed = (await api(acme, "GET", "/api/v1/suppressions?limit=100")).body.data as {
    email: string;
    reason: string;
    messageId: string;
  }[];
  expect(listed.map((s) => [s.email, s.reason, s.messageId]).sort()).toEqual(
    CASES.flatMap(([to, type], i) => (type === "hard" ? [[to, "hard_bounce", ids[i]!]] : [])).sort(),
  );
  expect((await api(beta, "GET", "/api/v1/suppressions")).body.data).toEqual([]);
  // Each DSN is in its message's history, after the delivery, and the message is no longer
  // delivered: bounced for a hard bounce, failed for the others.
  for (const [i, [to, type]] of CASES.entries()) {
    const email = (await api(acme, "GET", `/api/v1/emails/${ids[i]}`)).body as {
      status: string;
      events: { status: string; detail: string }[];
    };
    const status = type === "hard" ? "bounced" : "failed";
    expect({ to, status: email.status }).toEqual({ to, status });
    expect(email.events.at(-2)?.status).toBe("delivered");
    expect({ to, last: email.events.at(-1) }).toMatchObject({
      to,
      last: { status, detail: expect.stringMatching(new RegExp(`^${type} bounce `)) },
    });
  }
}, 120_000);

test("RFC 5965's ARF example about one of our messages: the recipient suppressed and unsubscribed, the complaint counted", async () => {
  await api(acme, "POST", "/api/v1/subscribers", { email: "reader@example.com", triggerWorkflows: false });
  const id = await accepted("reader@example.com", "bulk");
  const example = readFileSync(join(import.meta.dir, "../feedback/testdata/rfc5965-example.eml"), "utf8");
  const arf = (mailFrom: string, rcptTo: string, messageId: string) =>
    example
      .replace("Original-Mail-From: <somespammer@example.net>", `Original-Mail-From: <${mailFrom}>`)
      .replace("Original-Rcpt-To: <user@example.com>", `Original-Rcpt-To: <${rcptTo}>`)
      .replace("Message-ID: 8787KJKJ3K4J3K4J3K4J3.mail@example.net", `Message-ID: <${messageId}>`)
      .replace(/\r?\n/g, "\r\n");
  const returnPath = returnPathFor(id, "acme.example", key);
  expect(await toInbound(FBL, arf(returnPath, "reader@example.com", `${id}@acme.example`))).toStartWith(
    `250 2.0.0 Applied to ${id}`,
  );
  const listed = (await api(acme, "GET", "/api/v1/suppressions?reason=complaint")).body.data as {
    email: string;
    messageId: string;
  }[];
  expect(listed.map((s) => [s.email, s.messageId])).toEqual([["reader@example.com", id]]);
  expect((await api(acme, "GET", "/api/v1/subscribers/reader@example.com")).body.status).toBe("unsubscribed");
  // A forged Original-Mail-From is never applied, not even by the message's own Message-ID.
  const forged = returnPath.replace(/-[a-z2-7]{16}@/, "-aaaaaaaaaaaaaaaa@");
  expect(await toInbound(FBL, arf(forged, "reader@example.com", `${id}@acme.example`))).toStartWith("550 5.7.1");
  // The Message-ID fallback believes a report only when it names the message's own recipient.
  const other = await accepted("other@example.com", "bulk");
  expect(await toInbound(FBL, arf("x@example.net", "someone@example.com", `${other}@acme.example`))).toStartWith(
    "550 5.1.1",
  );
  expect(await toInbound(FBL, arf("x@example.net", "other@example.com", `${other}@acme.example`))).toStartWith(
    `250 2.0.0 Applied to ${other}`,
  );
  // Counted: GET /api/v1/stats/emails has them, and the rate over delivered messages (none here).
  const stats = (await api(acme, "GET", "/api/v1/stats/emails")).body as {
    complaintRate: number;
    data: { complained: number }[];
  };
  expect(stats.data.reduce((n, r) => n + r.complained, 0)).toBe(2);
  // Over the 6 messages delivered (and bounced later) in the test before.
  expect(stats.complaintRate).toBeCloseTo(2 / 6);
}, 60_000);

test("forged or altered return paths are refused at RCPT; an unreadable report at DATA; each counted", async () => {
  const id = await accepted("victim@example.com", "bulk");
  const good = returnPathFor(id, "acme.example", key);
  const altered = good.replace(/^msg_[0-9a-f]/, (m) => (m.endsWith("0") ? "msg_1" : "msg_0"));
  expect(await toInbound(altered, "Subject: x\r\n\r\nx\r\n")).toStartWith("550 5.7.1");
  expect(await toInbound(`${id}@bounces.acme.example`, "Subject: x\r\n\r\nx\r\n")).toStartWith("550 5.1.1");
  expect(await toInbound("postmaster@acme.example", "Subject: x\r\n\r\nx\r\n")).toStartWith("550 5.1.1");
  expect(await toInbound(good, "Subject: hello\r\n\r\njust a note\r\n", "someone@example.net")).toStartWith(
    "550 5.6.0",
  );
  // Nothing of that changed acme's list.
  expect(
    ((await api(acme, "GET", "/api/v1/suppressions?reason=hard_bounce&limit=100")).body.data as unknown[]).length,
  ).toBe(CASES.filter(([, t]) => t === "hard").length);
  const metrics = await (await fetch(`http://127.0.0.1:${inbound.metricsPort}/metrics`)).text();
  expect(metrics).toMatch(/mailcore_inbound_recipients_refused_total\{reason="forged"[^}]*\} [1-9]/);
  expect(metrics).toMatch(/mailcore_inbound_recipients_refused_total\{reason="not-ours"[^}]*\} [1-9]/);
  expect(metrics).toMatch(/mailcore_inbound_reports_total\{kind="none",outcome="malformed"[^}]*\} [1-9]/);
  expect(metrics).toMatch(/mailcore_inbound_reports_total\{kind="arf",outcome="forged"[^}]*\} [1-9]/);
  expect(metrics).toMatch(/mailcore_inbound_reports_total\{kind="dsn",outcome="applied"[^}]*\} [1-9]/);
}, 60_000);

test("RFC 3464's example, a megabyte long, naming another organization's message inside: tied by its return path alone", async () => {
  const id = await accepted("louisl@larry.example", "bulk");
  const theirs = await sendEmail(stack.apiUrls[0]!, beta, {
    from: "app@beta.example",
    to: "louisl@larry.example",
    subject: "s",
    text: "t",
  });
  const example = readFileSync(join(import.meta.dir, "../feedback/testdata/rfc3464-simple.eml"), "utf8");
  const dsn = example
    .replaceAll("louisl@larry.slip.umd.edu", "louisl@larry.example")
    .replace("Status: 4.0.0", "Status: 5.1.1")
    .replace("Diagnostic-Code: smtp; 426 connection timed out", "Diagnostic-Code: smtp; 550 5.1.1 user unknown")
    // The returned message claims to be beta's, and is a megabyte long.
    .replace("Message-ID: <19940702.1710@cs.utk.edu>", `Message-ID: <${theirs.body.id}@beta.example>`)
    .replace("the original message", `the original message\n${"x".repeat(76)}\n`.repeat(14_000))
    .replace(/\r?\n/g, "\r\n");
  expect(dsn.length).toBeGreaterThan(1_000_000);
  expect(await toInbound(returnPathFor(id, "acme.example", key), dsn)).toStartWith(`250 2.0.0 Applied to ${id}`);
  const listed = (await api(acme, "GET", "/api/v1/suppressions?limit=100")).body.data as {
    email: string;
    messageId: string;
  }[];
  expect(listed).toContainEqual(expect.objectContaining({ email: "louisl@larry.example", messageId: id }));
  expect((await api(beta, "GET", "/api/v1/suppressions")).body.data).toEqual([]);
}, 60_000);
