// A report as the daemon is handed it: RFC 3464's and RFC 5965's examples, and something that
// is no report.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseReport } from "../feedback/report";
import { applyRequest } from "./report_request";

const example = (name: string) => readFileSync(join(import.meta.dir, "../feedback/testdata", name), "utf8");

test("a DSN: each recipient with its action, status, diagnostic and classification; the returned Message-ID", async () => {
  const report = await parseReport(example("rfc3464-simple.eml"), { mailFrom: "" });
  expect(applyRequest(report, "msg_1-aaaaaaaaaaaaaaaa@bounces.acme.example")).toEqual({
    envelopeRecipient: "msg_1-aaaaaaaaaaaaaaaa@bounces.acme.example",
    kind: "dsn",
    originalMessageId: "19940702.1710@cs.utk.edu",
    recipients: [
      {
        finalRecipient: "louisl@larry.slip.umd.edu",
        action: "failed",
        status: "4.0.0",
        diagnostic: "426 connection timed out",
        type: "soft",
      },
    ],
  });
});

test("an ARF report: its Original-Mail-From, feedback type, and the reported message's recipients", async () => {
  const report = await parseReport(example("rfc5965-example.eml"));
  expect(applyRequest(report, "fbl@feedback.test")).toEqual({
    envelopeRecipient: "fbl@feedback.test",
    kind: "arf",
    originalMessageId: "8787KJKJ3K4J3K4J3K4J3.mail@example.net",
    originalMailFrom: "somespammer@example.net",
    feedbackType: "abuse",
    // The reported message's To is "<Undisclosed Recipients>": no address.
    originalRecipients: ["user@example.com"],
  });
});

test("anything else is no report, with the reason", async () => {
  const report = await parseReport("Subject: hello\r\n\r\njust a note\r\n", { mailFrom: "someone@example.net" });
  expect(applyRequest(report, "fbl@feedback.test")).toEqual({ malformed: expect.any(String) });
});
