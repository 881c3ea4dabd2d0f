import { create } from "@bufbuild/protobuf";
import emailAddresses from "email-addresses";
import { marked } from "marked";
import { createHash } from "node:crypto";
import { type Email, EmailSchema, Lane } from "../gen/mailcore/limiter/v1/mail_pb";

// The body of POST /api/v1/emails, validated into the Email the daemon queues.

export interface SendInput {
  lane: Lane;
  email: Email;
  /** A fingerprint of the validated request, for Idempotency-Key comparisons. */
  fingerprint: string;
}

export class InvalidField extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

const FIELDS = new Set(["from", "to", "subject", "html", "text", "markdown", "replyTo", "headers", "tags", "tracking", "lane"]);
const HEADER_NAME = /^[!-9;-~]{1,76}$/;
const TAG = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_HEADERS = 50;
const MAX_TAGS = 20;
const MAX_LINE = 998;
/** Headers the message is built from; a request cannot set them through `headers`. */
const RESERVED_HEADERS = new Set([
  "from", "to", "cc", "bcc", "subject", "reply-to", "sender", "date", "message-id", "mime-version",
  "content-type", "content-transfer-encoding", "content-disposition", "return-path", "received",
]);

function mailbox(field: string, value: unknown): { header: string; address: string } {
  if (typeof value !== "string" || value.trim() === "") throw new InvalidField(field, "must be an email address");
  if (/[\r\n]/.test(value)) throw new InvalidField(field, "must be one line");
  const parsed = emailAddresses.parseOneAddress({ input: value.trim(), rfc6532: true, rejectTLD: true });
  if (!parsed || parsed.type !== "mailbox") throw new InvalidField(field, `${JSON.stringify(value)} is not one email address`);
  return { header: value.trim(), address: parsed.address };
}

function optionalString(field: string, value: unknown, max: number): string {
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new InvalidField(field, "must be a string");
  if (value.length > max) throw new InvalidField(field, `must be at most ${max} characters`);
  return value;
}

/** Validates a parsed JSON body. Throws InvalidField naming the first bad field. */
export function parseSendRequest(body: unknown): SendInput {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new InvalidField("body", "must be a JSON object");
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");

  const from = mailbox("from", b.from);
  let toValue = b.to;
  if (Array.isArray(toValue)) {
    if (toValue.length !== 1) throw new InvalidField("to", "must name exactly one recipient (send one message per recipient)");
    toValue = toValue[0];
  }
  const to = mailbox("to", toValue);
  const replyTo = b.replyTo === undefined || b.replyTo === null ? undefined : mailbox("replyTo", b.replyTo);

  const subject = optionalString("subject", b.subject, MAX_LINE);
  if (subject.trim() === "") throw new InvalidField("subject", "is required");
  if (/[\r\n]/.test(subject)) throw new InvalidField("subject", "must be one line");

  let html = optionalString("html", b.html, Number.POSITIVE_INFINITY);
  let text = optionalString("text", b.text, Number.POSITIVE_INFINITY);
  const markdown = optionalString("markdown", b.markdown, Number.POSITIVE_INFINITY);
  if (markdown !== "") {
    if (html !== "") throw new InvalidField("markdown", "cannot be combined with html");
    html = marked.parse(markdown, { async: false, gfm: true });
    if (text === "") text = markdown;
  }
  if (html === "" && text === "") throw new InvalidField("html", "one of html, text or markdown is required");

  const headers: Record<string, string> = {};
  if (b.headers !== undefined && b.headers !== null) {
    if (typeof b.headers !== "object" || Array.isArray(b.headers)) throw new InvalidField("headers", "must be an object of header names to values");
    const entries = Object.entries(b.headers as Record<string, unknown>);
    if (entries.length > MAX_HEADERS) throw new InvalidField("headers", `at most ${MAX_HEADERS}`);
    for (const [name, value] of entries) {
      if (!HEADER_NAME.test(name)) throw new InvalidField(`headers.${name}`, "is not a valid header name");
      if (RESERVED_HEADERS.has(name.toLowerCase())) throw new InvalidField(`headers.${name}`, "is set from the request's own fields");
      if (typeof value !== "string" || /[\r\n]/.test(value) || value.length > MAX_LINE) {
        throw new InvalidField(`headers.${name}`, `must be a one-line string of at most ${MAX_LINE} characters`);
      }
      headers[name] = value;
    }
  }

  let tags: string[] = [];
  if (b.tags !== undefined && b.tags !== null) {
    if (!Array.isArray(b.tags) || b.tags.length > MAX_TAGS) throw new InvalidField("tags", `must be a list of at most ${MAX_TAGS} tags`);
    for (const t of b.tags) if (typeof t !== "string" || !TAG.test(t)) throw new InvalidField("tags", `${JSON.stringify(t)} is not a tag (letters, digits, _ and -, up to 64)`);
    tags = b.tags as string[];
  }

  let trackOpens = false;
  let trackClicks = false;
  if (b.tracking !== undefined && b.tracking !== null) {
    const t = b.tracking as Record<string, unknown>;
    if (typeof t !== "object" || Array.isArray(t) || Object.keys(t).some((k) => k !== "opens" && k !== "clicks")) {
      throw new InvalidField("tracking", 'must be {"opens": boolean, "clicks": boolean}');
    }
    for (const k of ["opens", "clicks"] as const) {
      if (t[k] !== undefined && typeof t[k] !== "boolean") throw new InvalidField(`tracking.${k}`, "must be true or false");
    }
    trackOpens = t.opens === true;
    trackClicks = t.clicks === true;
  }

  let lane = Lane.TRANSACTIONAL;
  if (b.lane !== undefined && b.lane !== null) {
    if (b.lane === "bulk") lane = Lane.BULK;
    else if (b.lane !== "transactional") throw new InvalidField("lane", 'must be "transactional" or "bulk"');
  }

  const email = create(EmailSchema, {
    from: from.header,
    fromAddress: from.address,
    to: to.header,
    toAddress: to.address,
    subject,
    html,
    text,
    replyTo: replyTo?.header ?? "",
    headers,
    tags,
    trackOpens,
    trackClicks,
  });
  const fingerprint = createHash("sha256")
    .update(JSON.stringify([lane, email.from, email.to, subject, html, text, email.replyTo, Object.entries(headers).sort(), tags, trackOpens, trackClicks]))
    .digest("hex");
  return { lane, email, fingerprint };
}
