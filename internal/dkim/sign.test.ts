import { expect, test } from "bun:test";
import { type HeaderField, parseMessage, relaxedBody, relaxedField } from "./canonical";
import { generateDkimKey } from "./keys";
import { type DkimSigningKey, fromDomain, signMessage } from "./sign";

// The signer's own rules. That its signatures verify is proven by others' verifiers
// (verifiers.test.ts); here: canonical forms, h=, what it refuses, the bytes it returns.

const rsa = await generateDkimKey("rsa-sha256");
const ed = await generateDkimKey("ed25519-sha256");
const rsaKey: DkimSigningKey = {
  domain: "example.com",
  selector: "mc202611a",
  algorithm: "rsa-sha256",
  privateKey: rsa.privateKey,
};
const edKey: DkimSigningKey = {
  ...rsaKey,
  selector: "mc202611a-ed",
  algorithm: "ed25519-sha256",
  privateKey: ed.privateKey,
};

const crlf = (lines: string[]) => Buffer.from(lines.join("\r\n"), "latin1");
const MESSAGE = crlf([
  "From: Jane <jane@example.com>",
  "To: bob@example.org",
  "Subject: Hello",
  "Date: Thu, 26 Nov 2026 10:00:00 +0000",
  "Message-ID: <msg_5f1d2c3b4a5968778695a4b3@example.com>",
  "MIME-Version: 1.0",
  "Content-Type: text/plain; charset=utf-8",
  "Content-Transfer-Encoding: 7bit",
  "X-Mailcore-Tags: welcome",
  "",
  "Hello Bob.",
  "",
]);

/** The tags of the first DKIM-Signature of a signed message, unfolded. */
function tagsOf(signed: Buffer): Map<string, string> {
  const { fields } = parseMessage(signed.toString("latin1"));
  const sig = fields.find((f) => f.name === "DKIM-Signature")!;
  const value = sig.raw.slice(sig.raw.indexOf(":") + 1).replace(/\s+/g, "");
  return new Map(value.split(";").map((t) => [t.slice(0, t.indexOf("=")), t.slice(t.indexOf("=") + 1)] as const));
}

function signError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("did not throw");
}

test("relaxed header canonicalization: RFC 6376 section 3.4.5's example", () => {
  const { fields } = parseMessage("A: X\r\nB : Y\t\r\n\tZ  \r\n\r\n");
  expect(fields.map(relaxedField)).toEqual(["a:X", "b:Y Z"]);
});

test("relaxed body canonicalization: RFC 6376 section 3.4.5's example, and the edges", () => {
  expect(relaxedBody(" C \r\nD \t E\r\n\r\n\r\n")).toBe(" C\r\nD E\r\n");
  expect(relaxedBody("")).toBe("");
  expect(relaxedBody("\r\n\r\n")).toBe("");
  expect(relaxedBody("no end of line \t")).toBe("no end of line\r\n");
  expect(relaxedBody("8-bit \xe9\xe8  bytes\r\n")).toBe("8-bit \xe9\xe8 bytes\r\n");
});

test("a message is split into fields and body; folded lines stay with their field", () => {
  const { fields, body } = parseMessage("Subject: a\r\n\tb\r\nTo: c\r\n\r\nbody\r\n");
  expect(fields.map((f: HeaderField) => f.raw)).toEqual(["Subject: a\r\n\tb", "To: c"]);
  expect(body).toBe("body\r\n");
  expect(parseMessage("To: c\r\n").body).toBe("");
});

test("h= covers the listed fields the message has, each once more than it occurs, From first", () => {
  const signed = signMessage(MESSAGE, [rsaKey]);
  expect(tagsOf(signed).get("h")).toBe(
    "from:from:to:to:subject:subject:date:date:message-id:message-id:mime-version:mime-version:content-type:content-type:content-transfer-encoding:content-transfer-encoding",
  );
  const campaign = crlf([
    "From: news@example.com",
    "Reply-To: help@example.com",
    "List-Unsubscribe: <https://example.com/u/x>",
    "List-Unsubscribe-Post: List-Unsubscribe=One-Click",
    "Feedback-ID: cmp_1:org_1:mailcore",
    "To: a@example.org",
    "",
    "x",
  ]);
  expect(tagsOf(signMessage(campaign, [rsaKey])).get("h")).toBe(
    "from:from:to:to:reply-to:reply-to:list-unsubscribe:list-unsubscribe:list-unsubscribe-post:list-unsubscribe-post:feedback-id:feedback-id",
  );
});

test("the tags: relaxed/relaxed, d= the From domain, s=, t= from the clock given", () => {
  const tags = tagsOf(signMessage(MESSAGE, [rsaKey], new Date("2026-11-26T10:00:00Z")));
  expect(tags.get("v")).toBe("1");
  expect(tags.get("a")).toBe("rsa-sha256");
  expect(tags.get("c")).toBe("relaxed/relaxed");
  expect(tags.get("d")).toBe("example.com");
  expect(tags.get("s")).toBe("mc202611a");
  expect(tags.get("t")).toBe(String(Date.parse("2026-11-26T10:00:00Z") / 1000));
  expect(tags.get("b")!.length).toBeGreaterThan(300);
});

test("the output is the signatures, then the message's bytes unchanged", () => {
  const eightBit = Buffer.concat([MESSAGE, Buffer.from([0xc3, 0xa9, 0x0d, 0x0a])]);
  const signed = signMessage(eightBit, [rsaKey, edKey]);
  const text = signed.toString("latin1");
  expect(text.startsWith("DKIM-Signature: v=1; a=rsa-sha256;")).toBe(true);
  const second = text.indexOf("\r\nDKIM-Signature: v=1; a=ed25519-sha256;");
  expect(second).toBeGreaterThan(0);
  expect(signed.subarray(signed.length - eightBit.length).equals(eightBit)).toBe(true);
  // Every line of the signatures is at most 78 characters.
  const header = text.slice(0, text.indexOf("From: "));
  expect(Math.max(...header.split("\r\n").map((l) => l.length))).toBeLessThanOrEqual(78);
});

test("a body that does not end in CRLF gets one (SMTP would add it)", () => {
  const noEnd = crlf(["From: jane@example.com", "", "no end"]);
  const signed = signMessage(noEnd, [rsaKey]);
  expect(signed.toString("latin1").endsWith("\r\n\r\nno end\r\n")).toBe(true);
});

test("the From domain: the mailbox's, lower-cased, an IDN in punycode", () => {
  expect(fromDomain(MESSAGE)).toBe("example.com");
  expect(fromDomain(crlf(["From: =?UTF-8?Q?Jos=C3=A9?= <jose@Example.COM>", "", ""]))).toBe("example.com");
  expect(fromDomain(crlf(['From: "a <b@c.org>" (note) <real@d.example>', "", ""]))).toBe("d.example");
  const idn = Buffer.from("From: Ana <ana@b\u00fccher.example>\r\n\r\nx\r\n", "utf8");
  expect(fromDomain(idn)).toBe("xn--bcher-kva.example");
  const key = { ...rsaKey, domain: "xn--bcher-kva.example" };
  expect(tagsOf(signMessage(idn, [key])).get("d")).toBe("xn--bcher-kva.example");
});

test("what it refuses to sign, each with its reason", () => {
  expect(signError(() => signMessage(MESSAGE, []))).toBe("no DKIM key to sign with: a message is never sent unsigned");
  expect(signError(() => signMessage(crlf(["To: a@b.c", "", "x"]), [rsaKey]))).toBe(
    "cannot sign: the message has 0 From fields; it must have one",
  );
  expect(signError(() => signMessage(crlf(["From: a@example.com", "From: b@example.com", "", "x"]), [rsaKey]))).toBe(
    "cannot sign: the message has 2 From fields; it must have one",
  );
  expect(signError(() => signMessage(crlf(["From: a@example.com, b@example.com", "", "x"]), [rsaKey]))).toBe(
    "cannot sign: the From field is not one mailbox",
  );
  const nested = `a@example.com ${"(".repeat(500)}${")".repeat(500)}`;
  expect(signError(() => signMessage(crlf([`From: ${nested}`, "", "x"]), [rsaKey]))).toBe(
    "cannot sign: the From field is too long to parse",
  );
  expect(signError(() => signMessage(crlf(["From: a@example.net", "", "x"]), [rsaKey]))).toBe(
    "cannot sign with the key of example.com: the message is from example.net, and d= must be the From domain",
  );
  expect(signError(() => signMessage(MESSAGE, [{ ...rsaKey, privateKey: ed.privateKey }]))).toBe(
    "the key of selector mc202611a is not an rsa private key, as rsa-sha256 needs",
  );
  expect(signError(() => signMessage(MESSAGE, [{ ...rsaKey, selector: "bad; h=to" }]))).toBe(
    'the selector "bad; h=to" is not a name',
  );
  expect(signError(() => signMessage(signMessage(MESSAGE, [rsaKey]), [rsaKey]))).toBe(
    "the message already has a DKIM-Signature: a message is signed once, last",
  );
  expect(signError(() => signMessage(Buffer.from("From: a@example.com\n\nx\n"), [rsaKey]))).toBe(
    "cannot sign: the message has a bare LF at byte 19: lines must end in CRLF",
  );
  expect(signError(() => signMessage(crlf([" folded: first", "From: a@example.com", "", "x"]), [rsaKey]))).toBe(
    "cannot sign: the message's first header line is a continuation line",
  );
  expect(signError(() => signMessage(crlf(["From: a@example.com", "no colon here", "", "x"]), [rsaKey]))).toBe(
    "cannot sign: header line 2 of the message is not a field",
  );
});

test("signing is deterministic for RSA: the same message, key and time give the same bytes", () => {
  const at = new Date("2026-11-26T10:00:00Z");
  expect(signMessage(MESSAGE, [rsaKey], at).equals(signMessage(MESSAGE, [rsaKey], at))).toBe(true);
});
