// A parsed SMTP message (mailparser's result) and its envelope, turned into the body of
// POST /api/v1/emails: the recipient from the envelope, never from headers; HTML
// kept when present, otherwise the text part as Markdown; tracking off; the transactional
// lane. Pure: the same message always gives the same body and the same Idempotency-Key.
import { isUtf8 } from "node:buffer";
import { createHash } from "node:crypto";
import type { AddressObject, ParsedMail } from "mailparser";
import { MAX_BODY_BYTES } from "../limits/limits";
import { isAllowedHeader, MAX_HEADER_VALUE, MAX_HEADERS } from "../mail/headers";
import { attachmentsRefused, invalidMessage, invalidSender, type Reply } from "./replies";

export interface Envelope {
  /** MAIL FROM; "" for the null sender. */
  mailFrom: string;
  /** The one RCPT TO. */
  rcptTo: string;
}

/** The JSON body of POST /api/v1/emails, as the SMTP front sends it. */
export interface SendBody {
  from: string;
  to: string;
  subject: string;
  html?: string;
  text?: string;
  markdown?: string;
  replyTo?: string;
  headers?: Record<string, string>;
  tracking: { opens: false; clicks: false };
  lane: "transactional";
}

export type Conversion =
  | { ok: true; body: SendBody; json: string; idempotencyKey: string | undefined }
  | { ok: false; reply: Reply };

export type MessageParts = Pick<
  ParsedMail,
  "from" | "to" | "replyTo" | "subject" | "html" | "text" | "attachments" | "headerLines" | "messageId"
>;

/** The options the front parses with: no derived parts (no HTML from text or text from HTML). */
export const PARSE_OPTIONS = {
  skipHtmlToText: true,
  skipTextToHtml: true,
  skipTextLinks: true,
  skipImageLinks: true,
} as const;

/** Raw header bytes as text: UTF-8 (RFC 6532) when they are, else the legacy windows-1252. */
function decodeRaw(latin1: string): string {
  const bytes = Buffer.from(latin1, "latin1");
  return isUtf8(bytes) ? bytes.toString("utf8") : new TextDecoder("windows-1252").decode(bytes);
}

/** The unfolded value of a raw header line ("Name: value\r\n continued"). */
function headerValue(line: string): string {
  return line
    .slice(line.indexOf(":") + 1)
    .replace(/\r?\n(?=[ \t])/g, "")
    .trim();
}

/** "Name" <address>, or the bare address; the name quoted so that the API's parser reads it back. */
export function mailboxHeader(name: string | undefined, address: string): string {
  const n = (name ?? "").replace(/[\r\n]+/g, " ").trim();
  return n === "" ? address : `"${n.replace(/[\\"]/g, "\\$&")}" <${address}>`;
}

function mailboxes(a: AddressObject | AddressObject[] | undefined) {
  return (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value);
}

/**
 * The Subject: mailparser's decoding (encoded words, UTF-8), except when the raw header is
 * 8-bit and not UTF-8, where mailparser would leave U+FFFD: then the raw bytes as windows-1252.
 */
function subjectOf(m: MessageParts): string | undefined {
  const raw = m.headerLines.find((h) => h.key === "subject")?.line;
  if (raw !== undefined && /[\x80-\xff]/.test(raw) && !isUtf8(Buffer.from(raw, "latin1")))
    return decodeRaw(headerValue(raw));
  return m.subject;
}

/**
 * The headers passed through to the API besides those the message is built from: the API's
 * allow-list (internal/mail/headers.ts). Everything else (Received, DKIM-Signature, Cc, Bcc,
 * ...) is dropped, and so is an allowed header that would break the API's limits, not the message.
 */
function forwardedHeaders(m: MessageParts): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  const seen = new Set<string>();
  for (const { key, line } of m.headerLines) {
    if (seen.size >= MAX_HEADERS) break;
    if (seen.has(key)) continue;
    const name = line.slice(0, line.indexOf(":")).trim();
    if (!isAllowedHeader(name)) continue;
    const value = decodeRaw(headerValue(line));
    if (value === "" || value.length > MAX_HEADER_VALUE) continue;
    seen.add(key);
    out[name] = value;
  }
  return seen.size > 0 ? out : undefined;
}

/**
 * The Idempotency-Key of a message: the same message (its Message-ID, envelope and content)
 * sent again, as a client does when the reply to DATA was lost, gets the same key, so the
 * API answers with the message already queued instead of queueing it twice. The content is
 * part of the key, so a client that reuses a Message-ID for another message still gets it
 * sent. Without a Message-ID nothing tells a retry from a new message: no key.
 */
export function idempotencyKey(messageId: string | undefined, env: Envelope, json: string): string | undefined {
  const id = messageId?.trim();
  if (!id) return undefined;
  const digest = createHash("sha256")
    .update(JSON.stringify(["smtp/1", id, env.mailFrom.toLowerCase(), env.rcptTo.toLowerCase(), json]))
    .digest("hex");
  return `smtp-${digest}`;
}

/** The API request for a message, or the reply that refuses it. */
export function toSendRequest(m: MessageParts, env: Envelope): Conversion {
  if (m.attachments.length > 0)
    return { ok: false, reply: attachmentsRefused(m.attachments.map((a) => a.filename ?? "")) };

  const from = mailboxes(m.from);
  if (from.length === 0) return { ok: false, reply: invalidMessage("the message has no From header") };
  if (from.length > 1 || !from[0]!.address || from[0]!.group)
    return { ok: false, reply: invalidSender("the From header must name exactly one mailbox") };

  const subject = subjectOf(m)?.trim();
  if (!subject) return { ok: false, reply: invalidMessage("the message has no Subject") };

  const html = typeof m.html === "string" && m.html.trim() !== "" ? m.html : undefined;
  const text = m.text !== undefined && m.text.trim() !== "" ? m.text : undefined;
  if (html === undefined && text === undefined)
    return { ok: false, reply: invalidMessage("the message has no text or HTML body") };

  // The recipient is the envelope's; its display name is taken from To when To names it.
  const named = mailboxes(m.to).find((a) => a.address?.toLowerCase() === env.rcptTo.toLowerCase());
  const replyTo = mailboxes(m.replyTo).find((a) => a.address);
  const headers = forwardedHeaders(m);

  const body: SendBody = {
    from: mailboxHeader(from[0]!.name, from[0]!.address!),
    to: mailboxHeader(named?.name, env.rcptTo),
    subject,
    ...(html !== undefined ? { html, ...(text !== undefined ? { text } : {}) } : { markdown: text }),
    ...(replyTo ? { replyTo: mailboxHeader(replyTo.name, replyTo.address!) } : {}),
    ...(headers ? { headers } : {}),
    tracking: { opens: false, clicks: false },
    lane: "transactional",
  };
  let json = JSON.stringify(body);
  // HTML and its text alternative can together exceed the API's body limit where the MIME
  // message did not: then the HTML alone is kept (HTML is preserved when present; the text
  // part is sent only when there is no HTML).
  if (Buffer.byteLength(json) > MAX_BODY_BYTES && body.html !== undefined && body.text !== undefined) {
    delete body.text;
    json = JSON.stringify(body);
  }
  return { ok: true, body, json, idempotencyKey: idempotencyKey(m.messageId, env, json) };
}
