import { create } from "@bufbuild/protobuf";
import { createHash } from "node:crypto";
import { type Email, EmailSchema, Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { ALLOWED_HEADERS_TEXT, HEADER_NAME, isAllowedHeader, MAX_HEADER_VALUE, MAX_HEADERS } from "../mail/headers";
import { renderMarkdown } from "../markdown/markdown";
import { InvalidField } from "./invalid_field";
import { mailboxAddress } from "./mailbox";

// The body of POST /api/v1/emails, validated into the Email the daemon queues.

export interface SendInput {
  lane: Lane;
  email: Email;
  /** A fingerprint of the validated request, for Idempotency-Key comparisons. */
  fingerprint: string;
}

const FIELDS = new Set([
  "from",
  "to",
  "subject",
  "html",
  "text",
  "markdown",
  "replyTo",
  "headers",
  "tags",
  "tracking",
  "lane",
]);
const TAG = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_TAGS = 20;
const MAX_LINE = MAX_HEADER_VALUE;
/**
 * The longest address field, display name included. The address parser (mailbox.ts) takes about
 * a millisecond per character on nested comments and overflows the stack past a few thousand; a
 * real "Name <mailbox>" is far shorter (a mailbox is at most 254).
 */
const MAX_ADDRESS_FIELD = 320;
/**
 * The most HTML that Markdown may render to. A 1 MB body of unclosed emphasis ("*a" repeated)
 * renders to 2.2 MB; a message that large to queue takes the daemon long enough to miss its
 * deadline, and a 503 invites the same request again.
 */
export const MAX_RENDERED_HTML = 2 * 1024 * 1024;

/** A parser that recursed past the stack's end (a RangeError) refuses the field instead of failing the request. */
function withinStack<T>(field: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof RangeError) throw new InvalidField(field, "is nested too deeply to parse");
    throw err;
  }
}

function mailbox(field: string, value: unknown): { header: string; address: string } {
  if (typeof value !== "string" || value.trim() === "") throw new InvalidField(field, "must be an email address");
  if (/[\r\n]/.test(value)) throw new InvalidField(field, "must be one line");
  const input = value.trim();
  if (input.length > MAX_ADDRESS_FIELD)
    throw new InvalidField(field, `must be at most ${MAX_ADDRESS_FIELD} characters`);
  const address = withinStack(field, () => mailboxAddress(input));
  if (address === undefined) throw new InvalidField(field, `${JSON.stringify(value)} is not one email address`);
  return { header: input, address };
}

function optionalString(field: string, value: unknown, max: number): string {
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new InvalidField(field, "must be a string");
  if (value.length > max) throw new InvalidField(field, `must be at most ${max} characters`);
  return value;
}

export type Validated = { ok: true; input: SendInput } | { ok: false; field: string; reason: string };

/** parseSendRequest with its refusal as a value, for the validation threads. */
export function validateSendRequest(body: unknown): Validated {
  try {
    return { ok: true, input: parseSendRequest(body) };
  } catch (err) {
    if (err instanceof InvalidField) return { ok: false, field: err.field, reason: err.reason };
    throw err;
  }
}

/** "to": one mailbox, or a list of exactly one. */
function recipient(value: unknown): { header: string; address: string } {
  if (Array.isArray(value)) {
    if (value.length !== 1)
      throw new InvalidField("to", "must name exactly one recipient (send one message per recipient)");
    return mailbox("to", value[0]);
  }
  return mailbox("to", value);
}

/** "subject": required, one line. */
function subjectOf(value: unknown): string {
  const subject = optionalString("subject", value, MAX_LINE);
  if (subject.trim() === "") throw new InvalidField("subject", "is required");
  if (/[\r\n]/.test(subject)) throw new InvalidField("subject", "must be one line");
  return subject;
}

/** The body: html and text as given, or Markdown rendered to html (and kept as the text when there is none). */
function content(b: Record<string, unknown>): { html: string; text: string } {
  let html = optionalString("html", b.html, Number.POSITIVE_INFINITY);
  let text = optionalString("text", b.text, Number.POSITIVE_INFINITY);
  const markdown = optionalString("markdown", b.markdown, Number.POSITIVE_INFINITY);
  if (markdown !== "") {
    if (html !== "") throw new InvalidField("markdown", "cannot be combined with html");
    html = withinStack("markdown", () => renderMarkdown(markdown));
    if (html.length > MAX_RENDERED_HTML)
      throw new InvalidField(
        "markdown",
        `renders to more than ${MAX_RENDERED_HTML} characters of HTML; shorten it or send html`,
      );
    if (text === "") text = markdown;
  }
  if (html === "" && text === "") throw new InvalidField("html", "one of html, text or markdown is required");
  return { html, text };
}

/** "headers": the allowed ones only, each a one-line string. */
function customHeaders(value: unknown): Record<string, string> {
  const headers: Record<string, string> = {};
  if (value === undefined || value === null) return headers;
  if (typeof value !== "object" || Array.isArray(value))
    throw new InvalidField("headers", "must be an object of header names to values");
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) throw new InvalidField("headers", `at most ${MAX_HEADERS}`);
  for (const [name, v] of entries) {
    if (!HEADER_NAME.test(name)) throw new InvalidField(`headers.${name}`, "is not a valid header name");
    if (!isAllowedHeader(name)) {
      throw new InvalidField(
        `headers.${name}`,
        `is not accepted: allowed are ${ALLOWED_HEADERS_TEXT}; From, To, Subject, Reply-To and the like come from the request's own fields`,
      );
    }
    if (typeof v !== "string" || /[\r\n]/.test(v) || v.length > MAX_LINE) {
      throw new InvalidField(`headers.${name}`, `must be a one-line string of at most ${MAX_LINE} characters`);
    }
    headers[name] = v;
  }
  return headers;
}

/** "tags": at most MAX_TAGS. */
function tagsOf(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > MAX_TAGS)
    throw new InvalidField("tags", `must be a list of at most ${MAX_TAGS} tags`);
  for (const t of value)
    if (typeof t !== "string" || !TAG.test(t))
      throw new InvalidField("tags", `${JSON.stringify(t)} is not a tag (letters, digits, _ and -, up to 64)`);
  return value as string[];
}

/** "tracking": opens and clicks, both off unless asked for. */
function trackingOf(value: unknown): { trackOpens: boolean; trackClicks: boolean } {
  if (value === undefined || value === null) return { trackOpens: false, trackClicks: false };
  const t = value as Record<string, unknown>;
  if (typeof t !== "object" || Array.isArray(t) || Object.keys(t).some((k) => k !== "opens" && k !== "clicks")) {
    throw new InvalidField("tracking", 'must be {"opens": boolean, "clicks": boolean}');
  }
  for (const k of ["opens", "clicks"] as const) {
    if (t[k] !== undefined && typeof t[k] !== "boolean")
      throw new InvalidField(`tracking.${k}`, "must be true or false");
  }
  return { trackOpens: t.opens === true, trackClicks: t.clicks === true };
}

/** "lane": transactional unless bulk is asked for. */
function laneOf(value: unknown): Lane {
  if (value === undefined || value === null || value === "transactional") return Lane.TRANSACTIONAL;
  if (value === "bulk") return Lane.BULK;
  throw new InvalidField("lane", 'must be "transactional" or "bulk"');
}

/** What an Idempotency-Key is compared by: the validated request, not its bytes. */
function fingerprintOf(lane: Lane, email: Email): string {
  return createHash("sha256")
    .update(
      JSON.stringify([
        lane,
        email.from,
        email.to,
        email.subject,
        email.html,
        email.text,
        email.replyTo,
        Object.entries(email.headers).sort(),
        email.tags,
        email.trackOpens,
        email.trackClicks,
      ]),
    )
    .digest("hex");
}

/** Validates a parsed JSON body. Throws InvalidField naming the first bad field. */
export function parseSendRequest(body: unknown): SendInput {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new InvalidField("body", "must be a JSON object");
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");

  // In this order: the first bad field is the one named.
  const from = mailbox("from", b.from);
  const to = recipient(b.to);
  const replyTo = b.replyTo === undefined || b.replyTo === null ? undefined : mailbox("replyTo", b.replyTo);
  const subject = subjectOf(b.subject);
  const { html, text } = content(b);
  const headers = customHeaders(b.headers);
  const tags = tagsOf(b.tags);
  const { trackOpens, trackClicks } = trackingOf(b.tracking);
  const lane = laneOf(b.lane);

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
  return { lane, email, fingerprint: fingerprintOf(lane, email) };
}
