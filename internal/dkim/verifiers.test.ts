import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTransport } from "nodemailer";
import { VERIFIERS, type VerifiedSignature } from "../testkit/dkimverifiers";
import { type DnsServer, startDnsServer } from "../testkit/dns";
import { dkimRecordName, dkimRecordValue, generateDkimKey, nextSelectors, splitTxtValue } from "./keys";
import { type DkimSigningKey, signMessage } from "./sign";

// Our signatures, checked by verifiers nobody on the project wrote (dkimpy and Mail::DKIM),
// each reading the keys' records from a DNS server of the test's own, published as DNS
// carries them: split into 255-byte strings. The messages are composed as the worker composes
// them (nodemailer, CRLF), and one by hand with every kind of spacing the relaxed forms fold.
// Each verifier checks all the messages in one run (a process start is most of its cost).

const DOMAIN = "example.com";
let dns: DnsServer;
let rsaKey: DkimSigningKey;
let edKey: DkimSigningKey;

const composer = createTransport({ streamTransport: true, buffer: true, newline: "windows" });
async function compose(mail: Parameters<typeof composer.sendMail>[0]): Promise<Buffer> {
  const info = await composer.sendMail({
    from: "Jane Doe <jane@example.com>",
    to: "bob@example.org",
    messageId: "<msg_5f1d2c3b4a5968778695a4b3@example.com>",
    ...mail,
  });
  return info.message as Buffer;
}

const plain = () => compose({ subject: "Your code", text: "Your code is 123456.\n" });
const multipart = () =>
  compose({
    subject: "Welcome, caf\u00e9 lovers",
    replyTo: "help@example.com",
    text: "Welcome!\n\nVisit https://example.com.\n",
    html: "<p>Welcome!</p>\n<p>Visit <a href='https://example.com'>us</a>.</p>\n",
  });
const campaign = () =>
  compose({
    from: "News <news@example.com>",
    subject: "November news",
    text: "This month...\n",
    html: "<h1>This month</h1>",
    headers: {
      "List-Unsubscribe": "<https://mail.example.com/u/tok_abc>, <mailto:unsub@example.com?subject=tok_abc>",
      "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
      "Feedback-ID": "cmp_1:org_1:mailcore",
    },
  });
/** By hand: every kind of spacing the relaxed forms fold, 8-bit bytes, empty lines at the end. */
const handWritten = Buffer.from(
  [
    "From:   Jane \t<jane@example.com>  ",
    "To: bob@example.org",
    "Subject:  a subject",
    "\tfolded  over\t two lines ",
    "Date: Thu, 26 Nov 2026 10:00:00 +0000",
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=iso-8859-1",
    "Content-Transfer-Encoding: 8bit",
    "",
    "  leading spaces, trailing spaces   ",
    "tabs\tand  runs \t of  spaces, 8-bit: caf\xe9",
    "",
    "",
    "",
  ].join("\r\n"),
  "latin1",
);

/** Text surgery on a signed message, byte for byte (latin1). */
function edit(message: Buffer, change: (text: string) => string): Buffer {
  const text = message.toString("latin1");
  const changed = change(text);
  if (changed === text) throw new Error("the edit changed nothing");
  return Buffer.from(changed, "latin1");
}
const replace = (from: string, to: string) => (text: string) => {
  if (!text.includes(from)) throw new Error(`the message has no ${JSON.stringify(from)}`);
  return text.replace(from, to);
};
/** Adds a field just under the signatures, where a reader's program shows it first. */
const addOnTop = (field: string) => (text: string) => {
  const at = text.search(/\r\n(?![ \t])(?!DKIM-Signature)/) + 2;
  return `${text.slice(0, at)}${field}\r\n${text.slice(at)}`;
};
const addAtBottom = (field: string) => replace("\r\n\r\n", `\r\n${field}\r\n\r\n`);

/** Every message the verifiers check, by name; made once the keys are. */
const messages: Record<string, Buffer> = {};

beforeAll(async () => {
  dns = await startDnsServer();
  const selectors = nextSelectors(new Date(), []);
  const [rsa, ed] = await Promise.all([generateDkimKey("rsa-sha256"), generateDkimKey("ed25519-sha256")]);
  rsaKey = { domain: DOMAIN, selector: selectors.rsa, algorithm: "rsa-sha256", privateKey: rsa.privateKey };
  edKey = { domain: DOMAIN, selector: selectors.ed25519, algorithm: "ed25519-sha256", privateKey: ed.privateKey };
  for (const [key, publicKey] of [
    [rsaKey, rsa.publicKey],
    [edKey, ed.publicKey],
  ] as const) {
    dns.setTxt(dkimRecordName(key.selector, DOMAIN), [splitTxtValue(dkimRecordValue(key.algorithm, publicKey))]);
  }
  const signed = {
    plain: signMessage(await plain(), [rsaKey]),
    multipart: signMessage(await multipart(), [rsaKey]),
    campaign: signMessage(await campaign(), [rsaKey]),
    dual: signMessage(await campaign(), [rsaKey, edKey]),
  };
  Object.assign(messages, signed, {
    handWritten: signMessage(handWritten, [rsaKey]),
    refolded: edit(signed.multipart, (t) =>
      [replace("Subject: ", "Subject:\t \r\n  "), replace("To: bob@example.org", "To:   bob@example.org   ")].reduce(
        (out, change) => change(out),
        `${t}\r\n\r\n`,
      ),
    ),
    bodyAltered: edit(signed.plain, replace("123456", "654321")),
    subjectAltered: edit(signed.plain, replace("Subject: Your code", "Subject: Your codes")),
    secondFromOnTop: edit(signed.plain, addOnTop("From: Bank <security@bank.example>")),
    secondFromAtBottom: edit(signed.plain, addAtBottom("From: Bank <security@bank.example>")),
    secondSubjectOnTop: edit(signed.plain, addOnTop("Subject: Urgent: confirm your password")),
    unsubscribeAltered: edit(signed.campaign, replace("u/tok_abc>", "u/tok_abd>")),
    unsubscribePostAltered: edit(signed.campaign, replace("One-Click", "One-Click-Not")),
    feedbackIdAltered: edit(signed.campaign, replace("cmp_1:org_1", "cmp_2:org_1")),
    unsubscribePostAdded: edit(signed.campaign, addOnTop("List-Unsubscribe-Post: List-Unsubscribe=One-Click")),
    dualAltered: edit(signed.dual, replace("This month", "That month")),
    noRecord: signMessage(await plain(), [{ ...rsaKey, selector: "mc190001a" }]),
  });
});
afterAll(() => dns.stop());

describe.each(Object.keys(VERIFIERS))("%s", (name) => {
  const results: Record<string, VerifiedSignature[]> = {};
  beforeAll(async () => {
    const names = Object.keys(messages);
    const out = await VERIFIERS[name]!(Object.values(messages), dns.address);
    for (const [i, n] of names.entries()) results[n] = out[i]!;
  });

  /** The message's one signature: ours (RSA), and whether it passed. */
  const only = (message: string) => {
    const sigs = results[message]!;
    expect(sigs).toHaveLength(1);
    expect(sigs[0]).toMatchObject({ domain: DOMAIN, algorithm: "rsa-sha256" });
    return sigs[0]!;
  };
  const expectPass = (message: string) => {
    const sig = only(message);
    expect({ message, result: sig.result, detail: sig.detail }).toEqual({ message, result: "pass", detail: "" });
    expect(sig.selector).toBe(rsaKey.selector);
    return sig;
  };
  const expectFail = (message: string) =>
    expect({ message, result: only(message).result }).not.toEqual({ message, result: "pass" });

  test("a plain message verifies, From listed twice", () => {
    expect(expectPass("plain").headers.filter((h) => h === "from")).toHaveLength(2);
  });

  test("an HTML and text multipart message with Reply-To verifies, Reply-To covered", () => {
    const sig = expectPass("multipart");
    expect(sig.headers).toContain("reply-to");
    expect(sig.headers).toContain("content-type");
  });

  test("a campaign's List-Unsubscribe, List-Unsubscribe-Post and Feedback-ID are covered", () => {
    const sig = expectPass("campaign");
    for (const h of ["list-unsubscribe", "list-unsubscribe-post", "feedback-id"]) expect(sig.headers).toContain(h);
    // Covered, not only listed: changing or adding any of them breaks the signature.
    for (const m of ["unsubscribeAltered", "unsubscribePostAltered", "feedbackIdAltered", "unsubscribePostAdded"])
      expectFail(m);
  });

  test("a message written by hand with every kind of spacing verifies (the relaxed forms agree)", () => {
    expectPass("handWritten");
  });

  test("what relays may do under relaxed/relaxed does not break it: re-folding, spacing, empty lines", () => {
    expectPass("refolded");
  });

  test("a message altered after signing fails: body, Subject", () => {
    expectFail("bodyAltered");
    expectFail("subjectAltered");
  });

  test("a second From added, on top or at the bottom, fails", () => {
    expectFail("secondFromOnTop");
    expectFail("secondFromAtBottom");
  });

  test("a second Subject added on top fails too (each covered field is listed once more than it occurs)", () => {
    expectFail("secondSubjectOnTop");
  });

  test("an RSA and an Ed25519 signature: RSA verifies; Ed25519 where the verifier has it", () => {
    const sigs = results.dual!;
    expect(sigs.map((s) => s.algorithm)).toEqual(["rsa-sha256", "ed25519-sha256"]);
    expect(sigs[0]!.result).toBe("pass");
    const ed = sigs[1]!;
    expect(ed.selector).toBe(edKey.selector);
    for (const h of ["list-unsubscribe", "list-unsubscribe-post", "feedback-id"]) expect(ed.headers).toContain(h);
    if (name === "Mail::DKIM") {
      // Debian 12's Mail::DKIM (1.20230212) predates its Ed25519 support: it reports the
      // signature unsupported and judges the message by the RSA one, as such receivers do.
      expect(ed).toMatchObject({ result: "invalid", detail: "invalid (unsupported algorithm ed25519-sha256)" });
    } else {
      expect(ed.result).toBe("pass");
      expect(results.dualAltered!.map((s) => s.result)).toEqual(["fail", "fail"]);
    }
  });

  test("a signature whose record is not published does not verify", () => {
    expectFail("noRecord");
    expect(only("noRecord").selector).toBe("mc190001a");
  });
});
