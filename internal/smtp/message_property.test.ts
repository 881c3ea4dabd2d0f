// Property-based test of the MIME-to-request mapping: generated messages (plain, HTML,
// multipart, attachments, encoded words, hostile bodies and headers) parsed by mailparser as the
// front parses them. The mapping never throws; a message it forwards is a JSON body the API's
// parser takes or refuses with a field, addressed to the envelope's recipient, with allowed
// headers only, and the same message always gets the same Idempotency-Key.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { simpleParser } from "mailparser";
import { validateSendRequest } from "../api/send_request";
import { isAllowedHeader } from "../mail/headers";
import { fuzzParams, reportFuzz } from "../testkit/fuzz";
import { PARSE_OPTIONS, toSendRequest } from "./message";

const repeat = (unit: string) => fc.integer({ min: 1, max: 300 }).map((n) => unit.repeat(n));
const line = fc.oneof(
  fc.string({ unit: fc.constantFrom(...'abcXYZ 09<>@"().,;:*_[]#=?-~\t') }),
  fc.string({ unit: "grapheme-ascii" }),
  fc.string({ unit: "grapheme" }),
  repeat("*a"),
  repeat("("),
  repeat(">"),
);
const mailbox = fc.oneof(
  fc.constantFrom(
    "no-reply@acme.example",
    "Acme <no-reply@acme.example>",
    '"Ac, me" <a@acme.example>',
    "=?UTF-8?B?w4lsw6hu?= <e@acme.example>",
    "a@b",
    "group: a@acme.example, b@acme.example;",
    "",
  ),
  fc.emailAddress(),
  line,
);
const extraHeader = fc.tuple(
  fc.oneof(
    fc.constantFrom(
      "X-Campaign",
      "List-Id",
      "In-Reply-To",
      "DKIM-Signature",
      "Received",
      "Cc",
      "X-Mailcore-Tags",
      "Content-ID",
    ),
    fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/),
  ),
  line,
);

const message = fc.record({
  from: fc.option(mailbox, { nil: undefined }),
  to: fc.option(mailbox, { nil: undefined }),
  subject: fc.option(line, { nil: undefined }),
  messageId: fc.option(fc.stringMatching(/^<[a-z0-9.]{1,20}@[a-z]{1,10}\.example>$/), { nil: undefined }),
  headers: fc.array(extraHeader, { maxLength: 4 }),
  shape: fc.constantFrom("plain", "html", "alternative", "attachment", "empty"),
  text: line,
  html: line,
  encoding: fc.constantFrom("7bit", "quoted-printable", "base64"),
});

type Message = typeof message extends fc.Arbitrary<infer T> ? T : never;

function encode(body: string, encoding: string): string {
  if (encoding === "base64") return Buffer.from(body).toString("base64").replace(/.{76}/g, "$&\r\n");
  if (encoding === "quoted-printable")
    return body.replace(/[^\x20-\x3c\x3e-\x7e]/g, (c) =>
      [...Buffer.from(c)].map((b) => `=${b.toString(16).toUpperCase().padStart(2, "0")}`).join(""),
    );
  return body.replace(/\r?\n/g, "\r\n");
}

function raw(m: Message): string {
  const head: string[] = [];
  if (m.from !== undefined) head.push(`From: ${m.from}`);
  if (m.to !== undefined) head.push(`To: ${m.to}`);
  if (m.subject !== undefined) head.push(`Subject: ${m.subject}`);
  if (m.messageId !== undefined) head.push(`Message-ID: ${m.messageId}`);
  for (const [name, value] of m.headers) head.push(`${name}: ${value}`);
  head.push("MIME-Version: 1.0");
  const part = (type: string, body: string) =>
    `Content-Type: ${type}; charset=utf-8\r\nContent-Transfer-Encoding: ${m.encoding}\r\n\r\n${encode(body, m.encoding)}`;
  let body: string;
  switch (m.shape) {
    case "plain":
      body = part("text/plain", m.text);
      break;
    case "html":
      body = part("text/html", m.html);
      break;
    case "empty":
      body = "Content-Type: text/plain\r\n\r\n";
      break;
    case "alternative":
    case "attachment": {
      const kind = m.shape === "alternative" ? "alternative" : "mixed";
      const second =
        m.shape === "alternative"
          ? part("text/html", m.html)
          : `Content-Type: application/pdf\r\nContent-Disposition: attachment; filename="x.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=`;
      body = `Content-Type: multipart/${kind}; boundary="b1"\r\n\r\n--b1\r\n${part("text/plain", m.text)}\r\n--b1\r\n${second}\r\n--b1--\r\n`;
      break;
    }
  }
  const [contentHead, ...rest] = body.split("\r\n\r\n");
  return `${head.join("\r\n")}\r\n${contentHead}\r\n\r\n${rest.join("\r\n\r\n")}`;
}

const envelope = { mailFrom: "bounces@acme.example", rcptTo: "Jane.Doe@dest.example" };

test("toSendRequest: never throws; what it forwards the API parses or refuses by field", async () => {
  const params = fuzzParams(300);
  const outcomes = { forwarded: 0, refused: 0 };
  await fc.assert(
    fc.asyncProperty(message, async (m) => {
      const parsed = await simpleParser(Buffer.from(raw(m)), PARSE_OPTIONS);
      const conversion = toSendRequest(parsed, envelope);
      if (!conversion.ok) {
        outcomes.refused++;
        expect([550, 552]).toContain(conversion.reply.code);
        return;
      }
      outcomes.forwarded++;
      const body = JSON.parse(conversion.json) as Record<string, unknown>;
      expect<unknown>(body).toEqual(conversion.body);
      expect(String(body.to)).toContain(`<${envelope.rcptTo}>`.slice(1, -1));
      for (const name of Object.keys((body.headers as Record<string, string>) ?? {}))
        expect(isAllowedHeader(name)).toBe(true);
      const validated = validateSendRequest(body); // a value either way, never a throw
      if (validated.ok) expect(validated.input.email.toAddress).toBe(envelope.rcptTo);
      // The same message again (a client's retry) gets the same key; without a Message-ID, none.
      const again = toSendRequest(await simpleParser(Buffer.from(raw(m)), PARSE_OPTIONS), envelope);
      expect(again.ok ? again.idempotencyKey : "refused").toBe(conversion.idempotencyKey);
      if (m.messageId === undefined) expect(conversion.idempotencyKey).toBeUndefined();
    }),
    params,
  );
  reportFuzz(`toSendRequest (${outcomes.forwarded} forwarded, ${outcomes.refused} refused)`, params);
  expect(outcomes.forwarded).toBeGreaterThan(0);
}, 120_000);
