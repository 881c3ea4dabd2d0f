// mailparser's result and the envelope -> the body of POST /api/v1/emails.
import { describe, expect, test } from "bun:test";
import { simpleParser } from "mailparser";
import { parseSendRequest } from "../api/send_request";
import { MAX_BODY_BYTES } from "../limits/limits";
import { type Conversion, idempotencyKey, mailboxHeader, PARSE_OPTIONS, toSendRequest } from "./message";

const ENV = { mailFrom: "bounce@acme.example", rcptTo: "jane@dest.example" };

async function convert(raw: string | Buffer, env = ENV): Promise<Conversion> {
  return toSendRequest(
    await simpleParser(typeof raw === "string" ? Buffer.from(raw.replace(/\n/g, "\r\n")) : raw, PARSE_OPTIONS),
    env,
  );
}

async function body(raw: string | Buffer, env = ENV) {
  const c = await convert(raw, env);
  if (!c.ok) throw new Error(`refused: ${c.reply.code} ${c.reply.text}`);
  // Whatever the front sends must pass the API's own validation.
  expect(() => parseSendRequest(JSON.parse(c.json))).not.toThrow();
  return c;
}

const HEAD =
  "From: Acme <no-reply@acme.example>\nTo: Jane Doe <jane@dest.example>\nSubject: Your code\nMessage-ID: <m1@acme.example>\n";

describe("a message becomes a send request", () => {
  test("text only: sent as Markdown, tracking off, transactional lane, recipient from the envelope", async () => {
    const c = await body(`${HEAD}\nYour code is **123456**.\n`);
    expect(c.body).toEqual({
      from: '"Acme" <no-reply@acme.example>',
      to: '"Jane Doe" <jane@dest.example>',
      subject: "Your code",
      markdown: "Your code is **123456**.\n",
      tracking: { opens: false, clicks: false },
      lane: "transactional",
    });
    expect(parseSendRequest(JSON.parse(c.json)).email.html).toContain("<strong>123456</strong>");
  });

  test("HTML is kept, with its text alternative", async () => {
    const c = await body(
      `${HEAD}MIME-Version: 1.0\nContent-Type: multipart/alternative; boundary="b"\n\n--b\nContent-Type: text/plain; charset=utf-8\n\nplain\n--b\nContent-Type: text/html; charset=utf-8\n\n<p>rich</p>\n--b--\n`,
    );
    expect(c.body.html).toBe("<p>rich</p>");
    expect(c.body.text).toBe("plain");
    expect(c.body.markdown).toBeUndefined();
  });

  test("recipients come from the envelope, never from To, Cc or Bcc", async () => {
    const c = await body(
      `From: a@acme.example\nTo: other@dest.example\nCc: c@dest.example\nBcc: b@dest.example\nSubject: s\n\nx\n`,
      { mailFrom: "", rcptTo: "real@dest.example" },
    );
    expect(c.body.to).toBe("real@dest.example");
    expect(c.json).not.toContain("other@dest.example");
    expect(c.json).not.toContain("c@dest.example");
  });

  test("Reply-To and pass-through headers; the rest is dropped", async () => {
    const c = await body(
      `${HEAD}Reply-To: Support <help@acme.example>\nX-Campaign: welcome\nX-Mailcore-Tags: spoofed\nList-Unsubscribe: <mailto:u@acme.example>\nDKIM-Signature: v=1; a=rsa-sha256\nReceived: from x\nReferences: <a@x>\n <b@x>\nX-Empty:\n\nx\n`,
    );
    expect(c.body.replyTo).toBe('"Support" <help@acme.example>');
    expect(c.body.headers).toEqual({
      "X-Campaign": "welcome",
      "List-Unsubscribe": "<mailto:u@acme.example>",
      References: "<a@x> <b@x>",
    });
  });

  test("8-bit headers: UTF-8 kept, other bytes read as windows-1252", async () => {
    const utf8 = await body(
      Buffer.from("From: =?utf-8?q?Zo=C3=AB?= <z@acme.example>\r\nSubject: Grüße ✓\r\nX-Note: café\r\n\r\nhi\r\n"),
    );
    expect(utf8.body.subject).toBe("Grüße ✓");
    expect(utf8.body.from).toBe('"Zoë" <z@acme.example>');
    expect(utf8.body.headers).toEqual({ "X-Note": "café" });
    const latin1 = await body(
      Buffer.concat([
        Buffer.from("From: z@acme.example\r\nSubject: Gr"),
        Buffer.from([0xfc, 0xdf]),
        Buffer.from("e\r\nX-Note: caf"),
        Buffer.from([0xe9]),
        Buffer.from("\r\n\r\nhi\r\n"),
      ]),
    );
    expect(latin1.body.subject).toBe("Grüße");
    expect(latin1.body.headers).toEqual({ "X-Note": "café" });
  });

  test("a display name with quotes and backslashes survives the API's address parser", async () => {
    const c = await body(`From: "Ann \\"A\\" \\\\ B" <a@acme.example>\nSubject: s\n\nx\n`);
    expect(parseSendRequest(JSON.parse(c.json)).email.fromAddress).toBe("a@acme.example");
    expect(mailboxHeader(" ", "a@b.example")).toBe("a@b.example");
  });

  test("HTML and text together over the API's body limit: the text alternative is dropped", async () => {
    const big = "x".repeat(600_000);
    const raw = `${HEAD}Content-Type: multipart/alternative; boundary="b"\n\n--b\nContent-Type: text/plain\n\n${big}\n--b\nContent-Type: text/html\n\n<p>${big}</p>\n--b--\n`;
    const c = await convert(raw);
    expect(c.ok).toBe(true);
    if (c.ok) {
      expect(c.body.text).toBeUndefined();
      expect(Buffer.byteLength(c.json)).toBeLessThanOrEqual(MAX_BODY_BYTES);
    }
  });
});

describe("messages that are refused before the API", () => {
  test.each<[string, string, number, string, string]>([
    [
      "an attachment",
      `${HEAD}Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain\n\nhi\n--b\nContent-Type: application/pdf; name=a.pdf\nContent-Disposition: attachment; filename=a.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0=\n--b--\n`,
      552,
      "5.6.0",
      "Attachments are not accepted over SMTP (a.pdf)",
    ],
    [
      "an inline image",
      `${HEAD}Content-Type: multipart/related; boundary="b"\n\n--b\nContent-Type: text/html\n\n<img src="cid:logo">\n--b\nContent-Type: image/png\nContent-ID: <logo>\nContent-Transfer-Encoding: base64\n\niVBORw0KGgo=\n--b--\n`,
      552,
      "5.6.0",
      "Attachments",
    ],
    ["no From", "To: a@b.example\nSubject: s\n\nx\n", 550, "5.6.0", "no From header"],
    [
      "two From mailboxes",
      "From: a@acme.example, b@acme.example\nSubject: s\n\nx\n",
      550,
      "5.1.7",
      "exactly one mailbox",
    ],
    ["a From group", "From: undisclosed:;\nSubject: s\n\nx\n", 550, "5.1.7", "exactly one mailbox"],
    ["no Subject", "From: a@acme.example\n\nx\n", 550, "5.6.0", "no Subject"],
    ["no body", `${HEAD}\n\n`, 550, "5.6.0", "no text or HTML body"],
    ["not a message at all", "\x00\x01 garbage\n::::\n", 550, "5.6.0", "no From header"],
  ])("%s", async (_, raw, code, status, text) => {
    const c = await convert(raw);
    expect(c.ok).toBe(false);
    if (!c.ok) {
      expect(c.reply.code).toBe(code);
      expect(c.reply.status).toBe(status);
      expect(c.reply.text).toContain(text);
    }
  });
});

describe("Idempotency-Key", () => {
  test("the same message and envelope: the same key; another envelope, content or Message-ID: another", async () => {
    const raw = `${HEAD}\nYour code is 1.\n`;
    const a = (await body(raw)).idempotencyKey!;
    expect(a).toMatch(/^smtp-[0-9a-f]{64}$/);
    expect((await body(raw)).idempotencyKey).toBe(a);
    expect((await body(raw, { ...ENV, mailFrom: "BOUNCE@acme.example" })).idempotencyKey).toBe(a); // addresses compare case-insensitively
    expect((await body(raw, { ...ENV, rcptTo: "joe@dest.example" })).idempotencyKey).not.toBe(a);
    expect((await body(raw, { ...ENV, mailFrom: "" })).idempotencyKey).not.toBe(a);
    expect((await body(raw.replace("code is 1", "code is 2"))).idempotencyKey).not.toBe(a);
    expect((await body(raw.replace("<m1@", "<m2@"))).idempotencyKey).not.toBe(a);
  });

  test("no Message-ID: no key (a retry cannot be told from a new message)", async () => {
    expect((await body("From: a@acme.example\nSubject: s\n\nx\n")).idempotencyKey).toBeUndefined();
    expect(idempotencyKey("  ", ENV, "{}")).toBeUndefined();
  });
});
