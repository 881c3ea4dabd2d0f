import { createHash, type KeyObject, sign } from "node:crypto";
import { domainToASCII } from "node:url";
import emailAddresses from "email-addresses";
import {
  fieldKey,
  fieldValue,
  type HeaderField,
  MessageFormatError,
  type ParsedMessage,
  parseMessage,
  relaxedBody,
  relaxedField,
} from "./canonical";
import { type DkimAlgorithm, keyTypeOf } from "./keys";

// Signs a finished message, once, last: relaxed/relaxed, d= the From domain, an explicit h=.
// The bytes returned are the bytes to send; anything that changes them afterwards (a
// re-encoding, a header added by us) breaks the signature.

export interface DkimSigningKey {
  /** d=: the From domain, in ASCII (punycode for an IDN). */
  domain: string;
  /** s=: where the key's record is published, under _domainkey.<domain>. */
  selector: string;
  algorithm: DkimAlgorithm;
  privateKey: KeyObject;
}

/**
 * The fields a signature covers, in h= order, each when the message has it. Each one present
 * is listed once more than it occurs: the extra entry signs its absence, so a second From (or
 * Subject, or List-Unsubscribe...) added on the way breaks the signature instead of being shown
 * to the reader (RFC 6376 section 8.15). The unsubscribe fields are covered as RFC 8058
 * section 4 requires for one-click unsubscribe.
 */
export const SIGNED_FIELDS = [
  "from",
  "to",
  "cc",
  "subject",
  "date",
  "message-id",
  "mime-version",
  "content-type",
  "content-transfer-encoding",
  "reply-to",
  "in-reply-to",
  "references",
  "list-id",
  "list-unsubscribe",
  "list-unsubscribe-post",
  "feedback-id",
] as const;

export class DkimSignError extends Error {}

/** Bounds the address parser (slow on nested comments, and out of stack past a few thousand); a real From field is far shorter. */
const MAX_FROM_FIELD = 998;
const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
const CRLF = Buffer.from("\r\n");
const EMPTY = Buffer.alloc(0);
/** Where a signature header's lines are folded: receivers take any length, people read 78. */
const LINE = 76;

/**
 * The message signed with each key, one DKIM-Signature per key (an RSA one and, optionally, an
 * Ed25519 one), prepended; the message itself is unchanged, except that a body not ending in
 * CRLF gets one (SMTP adds it anyway, and the verifiers would disagree on it otherwise).
 */
export function signMessage(message: Buffer, keys: readonly DkimSigningKey[], now: Date = new Date()): Buffer {
  if (keys.length === 0) throw new DkimSignError("no DKIM key to sign with: a message is never sent unsigned");
  const parsed = parse(message.toString("latin1"));
  if (parsed.fields.some((f) => fieldKey(f) === "dkim-signature"))
    throw new DkimSignError("the message already has a DKIM-Signature: a message is signed once, last");
  const domain = fromDomainOf(parsed);
  for (const key of keys) checkKey(key, domain);
  const endOfLine = parsed.body !== "" && !parsed.body.endsWith("\r\n") ? CRLF : EMPTY;
  const bodyHash = createHash("sha256").update(relaxedBody(parsed.body), "latin1").digest("base64");
  const names = headerList(parsed.fields);
  const covered = coveredFields(parsed.fields, names)
    .map((f) => `${relaxedField(f)}\r\n`)
    .join("");
  const timestamp = Math.floor(now.getTime() / 1000);
  const signatures = keys.map((key) => signatureField(key, names, bodyHash, timestamp, covered));
  return Buffer.concat([Buffer.from(signatures.join(""), "latin1"), message, endOfLine]);
}

/** The From domain of a message (lower-cased ASCII): the d= its signature must carry. */
export function fromDomain(message: Buffer): string {
  return fromDomainOf(parse(message.toString("latin1")));
}

function parse(text: string): ParsedMessage {
  try {
    return parseMessage(text);
  } catch (err) {
    if (err instanceof MessageFormatError) throw new DkimSignError(`cannot sign: ${err.message}`);
    throw err;
  }
}

function fromDomainOf(parsed: ParsedMessage): string {
  const from = parsed.fields.filter((f) => fieldKey(f) === "from");
  if (from.length !== 1)
    throw new DkimSignError(`cannot sign: the message has ${from.length} From fields; it must have one`);
  // Bytes above 127 in the header are UTF-8 (RFC 6532); the parser reads it as text.
  const value = Buffer.from(fieldValue(from[0]!).replace(/\r\n/g, ""), "latin1").toString("utf8").trim();
  if (value.length > MAX_FROM_FIELD) throw new DkimSignError("cannot sign: the From field is too long to parse");
  const parsedFrom = emailAddresses.parseAddressList({ input: value, rfc6532: true });
  const mailbox = parsedFrom?.length === 1 && parsedFrom[0]!.type === "mailbox" ? parsedFrom[0] : undefined;
  if (mailbox === undefined) throw new DkimSignError("cannot sign: the From field is not one mailbox");
  const domain = domainToASCII(mailbox.domain.toLowerCase());
  if (domain === "" || !NAME.test(domain))
    throw new DkimSignError(`cannot sign: the From domain ${JSON.stringify(mailbox.domain)} is not a domain name`);
  return domain;
}

function checkKey(key: DkimSigningKey, fromDomain: string): void {
  if (key.domain.toLowerCase() !== fromDomain)
    throw new DkimSignError(
      `cannot sign with the key of ${key.domain}: the message is from ${fromDomain}, and d= must be the From domain`,
    );
  if (!NAME.test(key.selector)) throw new DkimSignError(`the selector ${JSON.stringify(key.selector)} is not a name`);
  if (key.privateKey.type !== "private" || key.privateKey.asymmetricKeyType !== keyTypeOf(key.algorithm))
    throw new DkimSignError(
      `the key of selector ${key.selector} is not an ${keyTypeOf(key.algorithm)} private key, as ${key.algorithm} needs`,
    );
}

/** h=: each field of SIGNED_FIELDS the message has, listed one more time than it occurs. */
function headerList(fields: readonly HeaderField[]): string[] {
  const names: string[] = [];
  for (const name of SIGNED_FIELDS) {
    const count = fields.filter((f) => fieldKey(f) === name).length;
    if (count > 0) for (let i = 0; i <= count; i++) names.push(name);
  }
  return names;
}

/** The fields h= names, in its order: each entry takes the last instance not yet taken, or none. */
function coveredFields(fields: readonly HeaderField[], names: readonly string[]): HeaderField[] {
  const left = new Map<string, HeaderField[]>();
  for (const f of fields) {
    const list = left.get(fieldKey(f)) ?? [];
    list.push(f);
    left.set(fieldKey(f), list);
  }
  const covered: HeaderField[] = [];
  for (const name of names) {
    const field = left.get(name)?.pop();
    if (field !== undefined) covered.push(field);
  }
  return covered;
}

/** One DKIM-Signature field, folded, with its CRLF. */
function signatureField(
  key: DkimSigningKey,
  names: readonly string[],
  bodyHash: string,
  timestamp: number,
  covered: string,
): string {
  // b= opens a line of its own, so that its value's first piece sits beside it.
  const tags = fold("DKIM-Signature:", [
    " v=1;",
    ` a=${key.algorithm};`,
    " c=relaxed/relaxed;",
    ` d=${key.domain.toLowerCase()};`,
    ` s=${key.selector};`,
    ` t=${timestamp};`,
    " h=",
    ...names.map((n, i) => (i < names.length - 1 ? `${n}:` : `${n};`)),
    ` bh=${bodyHash};`,
  ]);
  const unsigned = `${tags}\r\n\tb=`;
  const data = Buffer.from(`${covered}${relaxedField({ name: "DKIM-Signature", raw: unsigned })}`, "latin1");
  const signature =
    key.algorithm === "rsa-sha256"
      ? sign("sha256", data, key.privateKey)
      : // RFC 8463 section 3: Ed25519 signs the SHA-256 hash of the data, not the data.
        sign(null, createHash("sha256").update(data).digest(), key.privateKey);
  return `${fold(unsigned, chunks(signature.toString("base64")))}\r\n`;
}

/** Base64 in pieces that a line can be folded between (FWS is allowed inside b=). */
function chunks(base64: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < base64.length; i += 64) out.push(base64.slice(i, i + 64));
  return out;
}

/**
 * Text with pieces appended, a line folded before a piece that would pass LINE; a piece that
 * starts with a space (a new tag) gives its space up to the fold. FWS may stand between any
 * two pieces: between tags, after a ":" of h=, inside base64.
 */
function fold(text: string, pieces: readonly string[]): string {
  let out = text;
  let column = text.length - text.lastIndexOf("\n") - 1;
  for (const piece of pieces) {
    if (column + piece.length > LINE && column > 1) {
      const rest = piece.startsWith(" ") ? piece.slice(1) : piece;
      out += `\r\n\t${rest}`;
      column = 1 + rest.length;
    } else {
      out += piece;
      column += piece.length;
    }
  }
  return out;
}
