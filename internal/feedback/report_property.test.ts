// Property-based test of the report reader: whatever arrives (bytes, a DSN cut anywhere, a DSN with
// lines dropped, repeated or replaced), parseReport answers with a report and never throws; a DSN
// and its recipients stay within the caps, and every classification is one of the four types.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fuzzParams, reportFuzz } from "../testkit/fuzz";
import { MAX_RECIPIENTS, parseReport, type Report } from "./report";

const SEEDS = ["rfc3464-simple.eml", "rfc3464-multi.eml", "rfc5965-example.eml"].map((f) =>
  readFileSync(join(import.meta.dir, "testdata", f), "utf8"),
);

const LINES = [
  "",
  "--RAA14128.773615765/CS.UTK.EDU",
  "--JAA13167.773673707/CS.UTK.EDU--",
  "Content-Type: message/delivery-status",
  "Content-Type: message/rfc822",
  "Content-Type: multipart/report; report-type=delivery-status; boundary=x",
  "Content-Transfer-Encoding: base64",
  "Final-Recipient: rfc822; a@b.example",
  "Status: 5.1.1",
  "Status: 9.9.9.9",
  "Action: failed",
  "Diagnostic-Code: smtp; 550 5.7.1 spam",
  "Feedback-Type: abuse",
  " folded continuation",
  "550 5.1.1 user unknown",
];

/** A seed message with some of its lines dropped, repeated or replaced, and maybe cut short. */
const mutated = fc
  .record({
    seed: fc.constantFrom(...SEEDS),
    edits: fc.array(
      fc.record({ at: fc.nat(), kind: fc.constantFrom("drop", "repeat", "replace"), line: fc.constantFrom(...LINES) }),
      { maxLength: 12 },
    ),
    cut: fc.option(fc.nat(), { nil: undefined }),
  })
  .map(({ seed, edits, cut }) => {
    const lines = seed.split("\n");
    for (const e of edits) {
      const i = e.at % lines.length;
      if (e.kind === "drop") lines.splice(i, 1);
      else if (e.kind === "repeat") lines.splice(i, 0, lines[i]!);
      else lines[i] = e.line;
    }
    const text = lines.join(cut === undefined ? "\n" : "\r\n");
    return cut === undefined ? text : text.slice(0, cut % (text.length + 1));
  });

const anything = fc.oneof(
  mutated,
  fc.string({ maxLength: 2_000 }),
  fc.uint8Array({ maxLength: 2_000 }).map((b) => Buffer.from(b).toString("latin1")),
);

function wellFormed(r: Report): void {
  if (r.kind === "none") {
    expect(r.reason.length).toBeGreaterThan(0);
    return;
  }
  if (r.kind === "arf") return;
  expect(r.dsn.recipients.length).toBeLessThanOrEqual(MAX_RECIPIENTS);
  for (const rcpt of r.dsn.recipients) {
    if (rcpt.classification) expect(["hard", "soft", "policy", "transient"]).toContain(rcpt.classification.type);
    if (rcpt.status) expect(rcpt.status).toMatch(/^[245]\.\d{1,3}\.\d{1,3}$/);
  }
}

test("parseReport never throws, and what it reads stays in bounds", async () => {
  const params = fuzzParams(300);
  await fc.assert(
    fc.asyncProperty(anything, async (raw) => {
      wellFormed(await parseReport(raw));
    }),
    params,
  );
  reportFuzz("parseReport", params);
});
