import { create } from "@bufbuild/protobuf";
import emailAddresses from "email-addresses";
import { createHash } from "node:crypto";
import { type Email, EmailSchema, Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { ALLOWED_HEADERS_TEXT, HEADER_NAME, isAllowedHeader, MAX_HEADER_VALUE, MAX_HEADERS } from "../mail/headers";
import { renderMarkdown } from "../markdown/markdown";

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
    /** What is wrong with the field, without its name. */
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
  }
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
 * The longest address field, display name included. email-addresses takes about a millisecond
 * per character on nested comments and overflows the stack past a few thousand; a real
 * "Name <mailbox>" is far shorter (a mailbox is at most 254).
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
  const parsed = withinStack(field, () => emailAddresses.parseOneAddress({ input, rfc6532: true, rejectTLD: true }));
  if (parsed?.type !== "mailbox") throw new InvalidField(field, `${JSON.stringify(value)} is not one email address`);
  return { header: input, address: parsed.address };
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

/** Validates a parsed JSON body. Throws InvalidField naming the first bad field. */
export function parseSendRequest(body: unknown): SendInput {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new InvalidField("body", "must be a JSON object");
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");

  const from = mailbox("from", b.from);
  let toValue = b.to;
  if (Array.isArray(toValue)) {
    if (toValue.length !== 1)
      throw new InvalidField("to", "must name exactly one recipient (send one message per recipient)");
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
    html = withinStack("markdown", () => renderMarkdown(markdown));
    if (html.length > MAX_RENDERED_HTML)
      throw new InvalidField(
        "markdown",
        `renders to more than ${MAX_RENDERED_HTML} characters of HTML; shorten it or send html`,
      );
    if (text === "") text = markdown;
  }
  if (html === "" && text === "") throw new InvalidField("html", "one of html, text or markdown is required");

  const headers: Record<string, string> = {};
  if (b.headers !== undefined && b.headers !== null) {
    if (typeof b.headers !== "object" || Array.isArray(b.headers))
      throw new InvalidField("headers", "must be an object of header names to values");
    const entries = Object.entries(b.headers as Record<string, unknown>);
    if (entries.length > MAX_HEADERS) throw new InvalidField("headers", `at most ${MAX_HEADERS}`);
    for (const [name, value] of entries) {
      if (!HEADER_NAME.test(name)) throw new InvalidField(`headers.${name}`, "is not a valid header name");
      if (!isAllowedHeader(name)) {
        throw new InvalidField(
          `headers.${name}`,
          `is not accepted: allowed are ${ALLOWED_HEADERS_TEXT}; From, To, Subject, Reply-To and the like come from the request's own fields`,
        );
      }
      if (typeof value !== "string" || /[\r\n]/.test(value) || value.length > MAX_LINE) {
        throw new InvalidField(`headers.${name}`, `must be a one-line string of at most ${MAX_LINE} characters`);
      }
      headers[name] = value;
    }
  }

  let tags: string[] = [];
  if (b.tags !== undefined && b.tags !== null) {
    if (!Array.isArray(b.tags) || b.tags.length > MAX_TAGS)
      throw new InvalidField("tags", `must be a list of at most ${MAX_TAGS} tags`);
    for (const t of b.tags)
      if (typeof t !== "string" || !TAG.test(t))
        throw new InvalidField("tags", `${JSON.stringify(t)} is not a tag (letters, digits, _ and -, up to 64)`);
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
      if (t[k] !== undefined && typeof t[k] !== "boolean")
        throw new InvalidField(`tracking.${k}`, "must be true or false");
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
    .update(
      JSON.stringify([
        lane,
        email.from,
        email.to,
        subject,
        html,
        text,
        email.replyTo,
        Object.entries(headers).sort(),
        tags,
        trackOpens,
        trackClicks,
      ]),
    )
    .digest("hex");
  return { lane, email, fingerprint };
}
