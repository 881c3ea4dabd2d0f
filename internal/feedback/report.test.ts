import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_RECIPIENTS, MAX_REPORT_BYTES, parseDeliveryStatus, parseReport, type Report } from "./report";

// The RFCs' examples are in testdata/ as the RFCs print them, except that "[original message goes
// here]" of RFC 3464's is replaced by a short message, so that its headers can be read back.
const fixture = (name: string) => readFileSync(join(import.meta.dir, "testdata", name));

function dsnOf(r: Report) {
  if (r.kind !== "dsn") throw new Error(`expected a DSN, got ${JSON.stringify(r)}`);
  return r.dsn;
}

function arfOf(r: Report) {
  if (r.kind !== "arf") throw new Error(`expected an ARF report, got ${JSON.stringify(r)}`);
  return r.arf;
}

/** A multipart/report around the given delivery-status text and returned part. */
function report(o: {
  status: string;
  returned?: string;
  returnedType?: string;
  reportType?: string;
  statusHeaders?: string;
  boundary?: string;
}): string {
  const b = o.boundary ?? "b0und";
  return [
    "From: MAILER-DAEMON@mx.example",
    "To: rp-1@bounces.sender.example",
    "Subject: Undelivered Mail Returned to Sender",
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type=${o.reportType ?? "delivery-status"}; boundary="${b}"`,
    "",
    `--${b}`,
    "Content-Type: text/plain",
    "",
    "Your message could not be delivered.",
    "",
    `--${b}`,
    o.statusHeaders ?? "Content-Type: message/delivery-status",
    "",
    o.status,
    "",
    ...(o.returned === undefined
      ? []
      : [`--${b}`, `Content-Type: ${o.returnedType ?? "message/rfc822"}`, "", o.returned, ""]),
    `--${b}--`,
    "",
  ].join("\r\n");
}

const ORIGINAL = [
  "Message-ID: <msg_01H@sender.example>",
  "From: Ann <ann@sender.example>",
  "To: bob@rcpt.example",
  "Subject: Your receipt",
  "X-Mailcore-Org: org_1",
  "",
  "Thanks.",
].join("\r\n");

describe("RFC 3464's examples", () => {
  test("a simple DSN: a 4.0.0 that ran out of retries is soft", async () => {
    const dsn = dsnOf(await parseReport(fixture("rfc3464-simple.eml")));
    expect(dsn.source).toBe("delivery-status");
    expect(dsn.reportingMta).toBe("cs.utk.edu");
    expect(dsn.recipients).toHaveLength(1);
    expect(dsn.recipients[0]).toMatchObject({
      finalRecipient: "louisl@larry.slip.umd.edu",
      originalRecipient: "louisl@larry.slip.umd.edu",
      action: "failed",
      status: "4.0.0",
      diagnostic: { type: "smtp", text: "426 connection timed out" },
      classification: { type: "soft", status: "4.0.0" },
    });
    expect(dsn.recipients[0]!.fields["last-attempt-date"]).toEqual(["Thu, 7 Jul 1994 17:15:49 -0400"]);
    expect(dsn.original?.messageId).toBe("19940702.1710@cs.utk.edu");
    expect(dsn.truncated).toBe(false);
  });

  test("a DSN of three recipients: two failed, one delayed; the folded diagnostic is unfolded", async () => {
    const dsn = dsnOf(await parseReport(fixture("rfc3464-multi.eml")));
    expect(dsn.recipients.map((r) => [r.finalRecipient, r.action, r.status, r.classification?.type])).toEqual([
      ["arathib@vnet.ibm.com", "failed", "5.0.0", "soft"],
      ["johnh@hpnjld.njd.hp.com", "delayed", "4.0.0", "transient"],
      ["wsnell@sdcc13.ucsd.edu", "failed", "5.0.0", "hard"],
    ]);
    expect(dsn.recipients[0]!.diagnostic?.text).toBe("550 'arathib@vnet.IBM.COM' is not a registered gateway user");
    expect(dsn.recipients[2]!.remoteMta).toBe("sdcc13.ucsd.edu");
    expect(dsn.original?.messageId).toBe("multi.1994@cs.utk.edu");
  });
});

describe("RFC 5965's example", () => {
  test("every field of the feedback report, and the original's headers (inline message/rfc822)", async () => {
    const arf = arfOf(await parseReport(fixture("rfc5965-example.eml")));
    expect(arf).toMatchObject({
      feedbackType: "abuse",
      userAgent: "SomeGenerator/1.0",
      version: "1",
      originalMailFrom: "somespammer@example.net",
      originalRcptTo: ["user@example.com"],
      arrivalDate: "Thu, 8 Mar 2005 14:00:00 EDT",
      reportingMta: "mail.example.com",
      sourceIp: "192.0.2.1",
      reportedDomain: ["example.net"],
      reportedUri: ["http://example.net/earn_money.html", "mailto:user@example.com"],
      authenticationResults: ["mail.example.com; spf=fail smtp.mail=somespammer@example.com"],
      truncated: false,
    });
    expect(arf.original).toMatchObject({ messageId: "8787KJKJ3K4J3K4J3K4J3.mail@example.net", headersOnly: false });
    expect(arf.original?.headers.subject).toEqual(["Earn money"]);
    expect(arf.original?.headers.received?.[0]).toContain("by example.com with ESMTP id M63d4137594e46;");
  });

  test("a report with only the original's headers (text/rfc822-headers) and several recipients", async () => {
    const raw = report({
      reportType: "feedback-report",
      statusHeaders: "Content-Type: message/feedback-report",
      status: [
        "Feedback-Type: fraud",
        "User-Agent: Yahoo!-Mail-Feedback/2.0",
        "Version: 1",
        "Original-Rcpt-To: a@rcpt.example",
        "Original-Rcpt-To: <b@rcpt.example>",
        "Source-IP: 192.0.2.7 (mx.sender.example)",
        "Received-Date: Mon, 1 Jun 2026 10:00:00 +0000",
        "Incidents: 3",
      ].join("\r\n"),
      returned: ORIGINAL.split("\r\n\r\n")[0]!,
      returnedType: "text/rfc822-headers",
    });
    const arf = arfOf(await parseReport(raw));
    expect(arf).toMatchObject({
      feedbackType: "fraud",
      originalRcptTo: ["a@rcpt.example", "b@rcpt.example"],
      sourceIp: "192.0.2.7",
      arrivalDate: "Mon, 1 Jun 2026 10:00:00 +0000",
      incidents: 3,
    });
    expect(arf.original).toMatchObject({ messageId: "msg_01H@sender.example", headersOnly: true });
    expect(arf.original?.headers["x-mailcore-org"]).toEqual(["org_1"]);
  });
});

describe("corner cases", () => {
  test("CRLF, lower-case names, comments, brackets, a missing per-message block, blocks run together", async () => {
    const dsn = dsnOf(
      await parseReport(
        report({
          status: [
            "final-recipient: RFC822; <Bob@Rcpt.example>",
            "action: Failed (bad mailbox)",
            "status: 5.1.1 (bad destination mailbox)",
            "diagnostic-code: SMTP; 550 5.1.1 <Bob@Rcpt.example>... User unknown",
            "X-Vendor-Id: 77",
            "Final-Recipient: rfc822;carol@rcpt.example",
            "Action: failed",
            "Status: 5.2.2",
            "this line is not a field",
            "Reporting-MTA: dns; mx.rcpt.example",
          ].join("\r\n"),
          returned: ORIGINAL,
        }),
      ),
    );
    expect(dsn.reportingMta).toBe("mx.rcpt.example");
    expect(dsn.recipients.map((r) => [r.finalRecipient, r.action, r.status, r.classification?.type])).toEqual([
      ["Bob@Rcpt.example", "failed", "5.1.1", "hard"],
      ["carol@rcpt.example", "failed", "5.2.2", "soft"],
    ]);
    expect(dsn.recipients[0]!.diagnostic).toEqual({
      type: "smtp",
      text: "550 5.1.1 <Bob@Rcpt.example>... User unknown",
    });
    expect(dsn.recipients[0]!.fields["x-vendor-id"]).toEqual(["77"]);
    expect(dsn.original?.messageId).toBe("msg_01H@sender.example");
  });

  test("fields named like an object's own properties are fields like any other", () => {
    const r = parseDeliveryStatus(
      "__proto__: x\nconstructor: y\n\nFinal-Recipient: rfc822; a@b.example\nStatus: 5.1.1\n",
    );
    const value = (name: string) => r.fields[name];
    expect(value("__proto__")).toEqual(["x"]);
    expect(value("constructor")).toEqual(["y"]);
    expect(r.recipients[0]!.status).toBe("5.1.1");
  });

  test("a delivered, relayed or expanded recipient is not a failure", async () => {
    const dsn = dsnOf(
      await parseReport(
        report({
          status: [
            "Reporting-MTA: dns; mx.rcpt.example",
            "",
            "Final-Recipient: rfc822; a@rcpt.example",
            "Action: delivered",
            "Status: 2.0.0",
            "",
            "Final-Recipient: rfc822; b@rcpt.example",
            "Action: relayed",
            "Status: 2.0.0",
          ].join("\n"),
        }),
      ),
    );
    expect(dsn.recipients.map((r) => [r.action, r.classification])).toEqual([
      ["delivered", undefined],
      ["relayed", undefined],
    ]);
  });

  test("a delivery-status part in base64 is decoded", async () => {
    const status = Buffer.from(
      "Final-Recipient: rfc822; a@rcpt.example\r\nAction: failed\r\nStatus: 5.1.1\r\n",
    ).toString("base64");
    const dsn = dsnOf(
      await parseReport(
        report({ status, statusHeaders: "Content-Type: message/delivery-status\r\nContent-Transfer-Encoding: base64" }),
      ),
    );
    expect(dsn.recipients[0]).toMatchObject({ finalRecipient: "a@rcpt.example", status: "5.1.1" });
  });

  test("an internationalized DSN (RFC 6533: message/global-delivery-status, message/global)", async () => {
    const dsn = dsnOf(
      await parseReport(
        report({
          statusHeaders: "Content-Type: message/global-delivery-status",
          status: "Final-Recipient: utf-8; jörg@bücher.example\r\nAction: failed\r\nStatus: 5.1.1",
          returned: ORIGINAL,
          returnedType: "message/global",
        }),
      ),
    );
    expect(dsn.recipients[0]!.finalRecipient).toBe("jörg@bücher.example");
    expect(dsn.original?.messageId).toBe("msg_01H@sender.example");
  });

  test("a DSN cut off inside its delivery-status part keeps what it read", async () => {
    const whole = report({
      status:
        "Reporting-MTA: dns; mx.rcpt.example\r\n\r\nFinal-Recipient: rfc822; a@rcpt.example\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\nFinal-Recipient: rfc822; b@rcpt.example\r\nAction: fai",
      returned: ORIGINAL,
    });
    const cut = whole.slice(0, whole.lastIndexOf("Action: fai") + "Action: fai".length);
    const dsn = dsnOf(await parseReport(cut));
    expect(dsn.recipients.map((r) => [r.finalRecipient, r.status])).toEqual([
      ["a@rcpt.example", "5.1.1"],
      ["b@rcpt.example", undefined],
    ]);
    expect(dsn.recipients[1]!.classification).toBeUndefined();
    expect(dsn.original).toBeUndefined();
  });

  test("a DSN of a DSN: the outer report's recipients; the returned DSN is only the original", async () => {
    const inner = report({
      status: "Final-Recipient: rfc822; inner@rcpt.example\r\nAction: failed\r\nStatus: 5.1.1",
      returned: ORIGINAL,
      boundary: "inner",
    }).replace("From: MAILER-DAEMON@mx.example", "From: MAILER-DAEMON@mx.example\r\nMessage-ID: <dsn-1@mx.example>");
    const dsn = dsnOf(
      await parseReport(
        report({
          status: "Final-Recipient: rfc822; rp-1@bounces.sender.example\r\nAction: failed\r\nStatus: 5.4.4",
          returned: inner,
          boundary: "outer",
        }),
      ),
    );
    expect(dsn.recipients.map((r) => r.finalRecipient)).toEqual(["rp-1@bounces.sender.example"]);
    expect(dsn.original?.messageId).toBe("dsn-1@mx.example");
    expect(dsn.original?.headers["content-type"]?.[0]).toContain("multipart/report");
  });

  test("a report forwarded as an attachment of another message is found (three levels at most)", async () => {
    const dsn = report({
      status: "Final-Recipient: rfc822; a@rcpt.example\r\nAction: failed\r\nStatus: 5.1.1",
      returned: ORIGINAL,
    });
    const wrap = (inner: string, n: number) =>
      [
        "From: someone@forwarder.example",
        "Subject: Fwd: bounce",
        "MIME-Version: 1.0",
        `Content-Type: multipart/mixed; boundary="w${n}"`,
        "",
        `--w${n}`,
        "Content-Type: text/plain",
        "",
        "See attached.",
        `--w${n}`,
        "Content-Type: message/rfc822",
        "Content-Disposition: attachment",
        "",
        inner,
        `--w${n}--`,
        "",
      ].join("\r\n");
    let nested = dsn;
    for (let n = 1; n <= 3; n++) nested = wrap(nested, n);
    expect(dsnOf(await parseReport(nested)).recipients[0]!.status).toBe("5.1.1");
    expect((await parseReport(wrap(nested, 4))).kind).toBe("none");
  });

  test("a megabyte-long DSN: read up to its cap, fields and original intact", async () => {
    const raw = report({
      status: "Final-Recipient: rfc822; a@rcpt.example\r\nAction: failed\r\nStatus: 5.2.2",
      returned: `${ORIGINAL}\r\n${"A".repeat(76).concat("\r\n").repeat(14_000)}`,
    });
    expect(raw.length).toBeGreaterThan(1_000_000);
    const dsn = dsnOf(await parseReport(raw));
    expect(dsn.truncated).toBe(true);
    expect(dsn.recipients[0]!.classification?.type).toBe("soft");
    expect(dsn.original?.messageId).toBe("msg_01H@sender.example");
  });

  test("a megabyte of text before the delivery-status part: the part is never reached", async () => {
    const raw = report({ status: "Final-Recipient: rfc822; a@rcpt.example\r\nStatus: 5.1.1" }).replace(
      "Your message could not be delivered.",
      "x".repeat(MAX_REPORT_BYTES + 1),
    );
    expect(await parseReport(raw)).toEqual({
      kind: "none",
      reason: "a report of type delivery-status without its part",
    });
  });

  test(`at most ${MAX_RECIPIENTS} recipients are read`, () => {
    const blocks = Array.from(
      { length: 5_000 },
      (_, i) => `Final-Recipient: rfc822; r${i}@rcpt.example\nAction: failed\nStatus: 5.1.1\n`,
    );
    const r = parseDeliveryStatus(`Reporting-MTA: dns; a\n\n${blocks.join("\n")}`);
    expect(r.recipients).toHaveLength(MAX_RECIPIENTS);
    // Run together without empty lines they are one block, whose fields are capped too.
    const runTogether = parseDeliveryStatus(blocks.join(""));
    expect(runTogether.recipients.length).toBeGreaterThan(0);
    expect(runTogether.recipients.length).toBeLessThanOrEqual(MAX_RECIPIENTS);
    expect(runTogether.recipients[0]!.finalRecipient).toBe("r0@rcpt.example");
  });

  test("a header of 200 KB is refused, not read", async () => {
    const raw = `Subject: ${"x".repeat(200_000)}\r\nFrom: MAILER-DAEMON@mx.example\r\n\r\n550 5.1.1 user unknown\r\n`;
    const r = await parseReport(raw);
    expect(r.kind).toBe("none");
  });

  test("garbage, an empty message and a plain message are none", async () => {
    for (const raw of [
      "",
      "\u0000\u0001\u0002 garbage",
      "From: a@b.example\r\nSubject: hi\r\n\r\nhello 550 there\r\n",
    ]) {
      expect((await parseReport(raw)).kind).toBe("none");
    }
  });

  test("multipart/report with a broken boundary is none, with the reason", async () => {
    const raw = report({ status: "Final-Recipient: rfc822; a@rcpt.example\r\nStatus: 5.1.1" }).replaceAll(
      "--b0und",
      "--other",
    );
    expect(await parseReport(raw)).toEqual({
      kind: "none",
      reason: "a report of type delivery-status without its part",
    });
  });
});

describe("bounces without a delivery-status part", () => {
  test("qmail's: the code in parentheses, the recipient on the line above", async () => {
    const raw = [
      "From: MAILER-DAEMON@mx.rcpt.example",
      "To: rp-1@bounces.sender.example",
      "Subject: failure notice",
      "",
      "Hi. This is the qmail-send program at mx.rcpt.example.",
      "I'm afraid I wasn't able to deliver your message to the following addresses.",
      "This is a permanent error; I've given up. Sorry it didn't work out.",
      "",
      "<bob@rcpt.example>:",
      "Sorry, no mailbox here by that name. (#5.1.1)",
      "",
      "--- Below this line is a copy of the message.",
      "",
      ORIGINAL,
    ].join("\n");
    const dsn = dsnOf(await parseReport(raw));
    expect(dsn.source).toBe("text");
    expect(dsn.recipients).toEqual([
      {
        finalRecipient: "bob@rcpt.example",
        action: "failed",
        status: "5.1.1",
        diagnostic: { text: "Sorry, no mailbox here by that name. (#5.1.1)" },
        classification: { type: "hard", status: "5.1.1", rule: "5.1.1: bad destination mailbox" },
        fields: {},
      },
    ]);
    expect(dsn.original?.messageId).toBe("msg_01H@sender.example");
  });

  test("a plain 550 with no enhanced code, from the null sender: decided by its words", async () => {
    const raw = [
      "From: Mail System <nobody@mx.rcpt.example>",
      "Subject: Message not delivered",
      "",
      "Delivery to the following recipient failed permanently:",
      "",
      "    carol@rcpt.example",
      "",
      "Technical details: remote server said: 550 user unknown",
    ].join("\n");
    const dsn = dsnOf(await parseReport(raw, { mailFrom: "" }));
    expect(dsn.recipients[0]).toMatchObject({
      finalRecipient: "carol@rcpt.example",
      status: "5.0.0",
      classification: { type: "hard", status: "5.0.0" },
    });
    expect(dsn.original).toBeUndefined();
  });

  test("a 4xx that the text says is still being retried is a delay", async () => {
    const raw = [
      "From: MAILER-DAEMON@mx.example",
      "Subject: Warning: message delayed",
      "",
      "<dave@rcpt.example>: host mx.rcpt.example said: 451 4.3.0 Temporary failure",
      "The mail system will continue trying to deliver your message.",
    ].join("\n");
    const r = dsnOf(await parseReport(raw)).recipients[0]!;
    expect([r.action, r.status, r.classification?.type]).toEqual(["delayed", "4.3.0", "transient"]);
  });

  test("an out-of-office reply is not a bounce, nor is a bounce-looking message from a person", async () => {
    const ooo = [
      "From: Bob <bob@rcpt.example>",
      "Subject: Out of office",
      "Auto-Submitted: auto-replied",
      "",
      "I am away until the 5th, room 550 5.1.1 is closed.",
    ].join("\n");
    expect((await parseReport(ooo)).kind).toBe("none");
    const noCode = "From: MAILER-DAEMON@mx.example\nSubject: Undelivered Mail\n\nIt did not work.\n";
    expect((await parseReport(noCode)).kind).toBe("none");
  });
});
