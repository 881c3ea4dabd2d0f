// DSNs written by a real MTA: a private Postfix accepts messages for a local user that does not
// exist, or relays them to a receiver of this test that refuses them (at RCPT, after DATA, with
// and without an enhanced status code, permanently or for now; an SMTPUTF8 address, whose DSN is
// message/global-delivery-status with a message/global). Postfix sends each DSN to the
// message's envelope sender at the "inbound" receiver; every one is parsed and checked: its
// fields, its classification, and that it names the message it is about, by the address it was
// sent to (the return path) and by the returned message's Message-ID.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { createTransport } from "nodemailer";
import { LOCAL_DOMAIN, type Postfix, startPostfix } from "../testkit/postfix";
import { type SmtpSink, startSmtpSink } from "../testkit/smtpsink";
import { freePort, waitFor } from "../testkit/testkit";
import type { BounceType } from "./classify";
import { parseReport } from "./report";

const RETURN_DOMAIN = "bounces.sender.test";

/** What the refusing receiver answers, by the recipient's local part. */
const AT_RCPT: Record<string, { code: number; text: string }> = {
  "rcpt-unknown": { code: 550, text: "5.1.1 No such user here" },
};
const AT_DATA: Record<string, { code: number; text: string }> = {
  unknown: { code: 550, text: "5.1.1 The email account that you tried to reach does not exist" },
  full: { code: 552, text: "5.2.2 The user's mailbox is full" },
  spam: { code: 554, text: "5.7.1 Message rejected as spam" },
  bare: { code: 550, text: "User unknown" },
  later: { code: 452, text: "4.2.2 Mailbox full, try again later" },
};
/** The local part up to its +tag: "unknown+2@remote.test" is answered as unknown@ is. */
const localPart = (address: string) => address.split("@")[0]!.split("+")[0]!;

interface Case {
  name: string;
  to: string[];
  /** Per recipient, in order: [action, Status, classification]. */
  want: [string, string | undefined, BounceType | undefined][];
  /** Only the headers come back (RET=HDRS), with the envelope id. */
  headersOnly?: boolean;
  notifySuccess?: boolean;
}

const CASES: Case[] = [
  { name: "local user unknown", to: [`nosuchuser@${LOCAL_DOMAIN}`], want: [["failed", "5.1.1", "hard"]] },
  { name: "550 5.1.1 at RCPT", to: ["rcpt-unknown@remote.test"], want: [["failed", "5.1.1", "hard"]] },
  { name: "550 5.1.1 after DATA", to: ["unknown@remote.test"], want: [["failed", "5.1.1", "hard"]] },
  { name: "552 5.2.2 after DATA", to: ["full@remote.test"], want: [["failed", "5.2.2", "soft"]] },
  { name: "554 5.7.1 after DATA", to: ["spam@remote.test"], want: [["failed", "5.7.1", "policy"]] },
  { name: "550 without an enhanced code", to: ["bare@remote.test"], want: [["failed", "5.0.0", "hard"]] },
  { name: "452 4.2.2, not retried", to: ["later@remote.test"], want: [["failed", "4.2.2", "soft"]] },
  {
    name: "headers only, with an envelope id",
    to: ["unknown+2@remote.test"],
    want: [["failed", "5.1.1", "hard"]],
    headersOnly: true,
  },
  {
    name: "two recipients, one refused at RCPT, one after DATA",
    to: ["rcpt-unknown+3@remote.test", "spam+3@remote.test"],
    want: [
      ["failed", "5.1.1", "hard"],
      ["failed", "5.7.1", "policy"],
    ],
  },
  {
    name: "an internationalized address (SMTPUTF8)",
    to: ["full+jörg@remote.test"],
    want: [["failed", "5.2.2", "soft"]],
  },
  { name: "nothing listening", to: ["anyone@closed.test"], want: [["failed", "4.4.1", "soft"]] },
  {
    name: "delivered, success notice asked",
    to: ["ok@remote.test"],
    want: [["relayed", "2.0.0", undefined]],
    headersOnly: true,
    notifySuccess: true,
  },
];

let postfix: Postfix;
let remote: SmtpSink;
let inbound: SmtpSink;

/** The system's Postfix directories, which the private instance must leave alone. */
const SYSTEM_DIRS = ["/etc/postfix", "/var/spool/postfix", "/var/lib/postfix"];

/** Every file and directory under dirs, with its size and modification time. */
function listing(dirs: string[]): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(path);
    } catch {
      return;
    }
    out.push(`${path} ${st.size} ${st.mtimeMs}`);
    if (st.isDirectory()) for (const name of readdirSync(path).sort()) walk(join(path, name));
  };
  for (const dir of dirs) walk(dir);
  return out;
}
const systemBefore = listing(SYSTEM_DIRS);

beforeAll(async () => {
  remote = await startSmtpSink({
    host: "127.0.0.2",
    atRcpt: (rcpt) => AT_RCPT[localPart(rcpt)],
    atData: (rcptTo) => AT_DATA[localPart(rcptTo[0]!)],
  });
  inbound = await startSmtpSink({ host: "127.0.0.3" });
  postfix = await startPostfix({
    routes: {
      "remote.test": { host: remote.host, port: remote.port },
      [RETURN_DOMAIN]: { host: inbound.host, port: inbound.port },
      "closed.test": { host: "127.0.0.4", port: await freePort() },
    },
  });
});

afterAll(async () => {
  const pid = postfix?.pid;
  await postfix?.stop();
  await Promise.all([remote?.stop(), inbound?.stop()]);
  // Stopped, not left behind: its master is gone.
  if (pid !== undefined) expect(postfix.running()).toBe(false);
  // The system's Postfix configuration and queue were not touched.
  expect(listing(SYSTEM_DIRS)).toEqual(systemBefore);
});

test("every DSN Postfix writes is parsed, classified and tied to its message", async () => {
  const transport = createTransport({ host: postfix.host, port: postfix.port, secure: false, ignoreTLS: true });
  for (const [i, c] of CASES.entries()) {
    await transport.sendMail({
      envelope: { from: `rp-${i}@${RETURN_DOMAIN}`, to: c.to },
      messageId: `<msg_${i}@sender.test>`,
      from: "Sender <app@sender.test>",
      to: c.to,
      subject: c.name,
      text: `case ${i}`,
      dsn: {
        id: `env-${i}`,
        ret: c.headersOnly ? "HDRS" : "FULL",
        notify: c.notifySuccess ? ["SUCCESS", "FAILURE"] : ["FAILURE"],
        recipient: `rp-${i}@${RETURN_DOMAIN}`,
      },
    });
  }
  transport.close();
  await waitFor(
    `${CASES.length} DSNs at the inbound receiver`,
    async () => inbound.received.length >= CASES.length,
    60_000,
  ).catch((err) => {
    throw new Error(`${err.message}; got ${inbound.received.length}\n${postfix.log()}`);
  });

  const got: Record<string, unknown>[] = [];
  const want: Record<string, unknown>[] = [];
  let tied = 0;
  for (const m of inbound.received) {
    // Each DSN comes from the null sender to the return path of exactly one message.
    const i = Number(/^rp-(\d+)@/.exec(m.rcptTo[0] ?? "")?.[1]);
    const c = CASES[i]!;
    const report = await parseReport(m.raw, { mailFrom: m.mailFrom });
    if (report.kind !== "dsn") throw new Error(`case ${c.name}: ${JSON.stringify(report)}`);
    const dsn = report.dsn;
    got.push({
      case: c.name,
      envelope: [m.mailFrom, m.rcptTo.length],
      source: dsn.source,
      reportingMta: dsn.reportingMta,
      truncated: dsn.truncated,
      originalEnvelopeId: dsn.originalEnvelopeId,
      recipients: dsn.recipients.map((r) => [r.finalRecipient, r.action, r.status, r.classification?.type]),
      headersOnly: dsn.original?.headersOnly,
    });
    want.push({
      case: c.name,
      envelope: ["", 1],
      source: "delivery-status",
      reportingMta: `mta.${LOCAL_DOMAIN}`,
      truncated: false,
      originalEnvelopeId: `env-${i}`,
      recipients: c.want.map((w, k) => [c.to[k], ...w]),
      headersOnly: c.headersOnly === true,
    });
    // The fallback tie: the returned message's Message-ID is the one it was sent with.
    if (dsn.original?.messageId === `msg_${i}@sender.test`) tied++;
  }
  expect(got).toEqual(want);
  expect(new Set(inbound.received.map((m) => m.rcptTo[0])).size).toBe(CASES.length);
  expect(tied).toBe(CASES.length);
});
