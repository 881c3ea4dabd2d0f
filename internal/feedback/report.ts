// Reads what comes back to the platform's own addresses: a delivery status notification (RFC 3464,
// multipart/report; report-type=delivery-status), a complaint from a feedback loop (RFC 5965,
// multipart/report; report-type=feedback-report), or a bounce without either that says in plain
// words what failed. mailparser splits the MIME structure and decodes the parts; the report parts'
// fields and the returned message's header section are read here (fields.ts), because mailparser
// leaves them as opaque attachments.
//
// Work is bounded: only the first MAX_REPORT_BYTES of the input are read (the report parts come
// before the returned message, whose header section is all that is needed of it), and every
// count and length below is capped. Nothing here throws on bad input: what cannot be read is a
// report of kind "none" with the reason.
import { type Attachment, type ParsedMail, simpleParser } from "mailparser";
import { type Classification, classify, statusInText } from "./classify";
import {
  addressIn,
  byName,
  type Field,
  type Fields,
  fieldBlocks,
  first,
  headerSection,
  messageIdIn,
  typedValue,
} from "./fields";

/** How much of a message is read; the rest is ignored (and the report says it was truncated). */
export const MAX_REPORT_BYTES = 256 * 1024;
/** Recipients read from one delivery-status part. */
export const MAX_RECIPIENTS = 100;
/** How much of the returned message is read for its header section. */
const MAX_ORIGINAL_CHARS = 64 * 1024;
/** How much of a bounce's plain text is searched for a status code. */
const MAX_TEXT_CHARS = 16 * 1024;
/** message/rfc822 parts opened one inside another, looking for a report forwarded as an attachment. */
const MAX_NESTING = 3;

/** The message a report returns, or the headers of it that it quotes. */
export interface OriginalMessage {
  /** Its Message-ID, without angle brackets. */
  messageId?: string;
  /** Its header section, by lower-case name. */
  headers: Fields;
  /** Whether only its headers came back (text/rfc822-headers), not the whole message. */
  headersOnly: boolean;
}

/** What a DSN says of one recipient (RFC 3464 section 2.3). */
export interface RecipientStatus {
  /** Final-Recipient's address (the type, such as rfc822, taken off). */
  finalRecipient?: string;
  /** Original-Recipient's address: the recipient as the sender gave it. */
  originalRecipient?: string;
  /** failed, delayed, delivered, relayed or expanded (lower case); undefined when absent. */
  action?: string;
  /** The Status code as given, when it reads C.S.D. */
  status?: string;
  /** Remote-MTA's name (the type, such as dns, taken off). */
  remoteMta?: string;
  /** Diagnostic-Code: its type (smtp, x-postfix, ...) and its text ("550 5.1.1 ..."). */
  diagnostic?: { type?: string; text: string };
  /** What the failure means for the mailbox; undefined when the recipient did not fail (delivered, relayed, expanded). */
  classification?: Classification;
  /** Every field of the recipient's block. */
  fields: Fields;
}

/** A delivery status notification, or a plain-text bounce read as one. */
export interface DeliveryReport {
  /** Where the statuses came from: a message/delivery-status part, or a plain-text bounce's words. */
  source: "delivery-status" | "text";
  /** Reporting-MTA's name (the type taken off). */
  reportingMta?: string;
  arrivalDate?: string;
  /** Original-Envelope-Id: the ENVID the sender gave with MAIL FROM. */
  originalEnvelopeId?: string;
  /** Every per-message field. */
  fields: Fields;
  recipients: RecipientStatus[];
  /** The returned message's headers: the fallback that ties a report to its message. */
  original?: OriginalMessage;
  /** Whether the input was longer than MAX_REPORT_BYTES and only its start was read. */
  truncated: boolean;
}

/** A complaint from a feedback loop: the fields of RFC 5965 section 3.1 and 3.2. */
export interface FeedbackReport {
  /** Feedback-Type in lower case: abuse, fraud, virus, other, not-spam, auth-failure (RFC 6591), ... */
  feedbackType?: string;
  userAgent?: string;
  version?: string;
  originalMailFrom?: string;
  originalRcptTo: string[];
  originalEnvelopeId?: string;
  /** Arrival-Date, or the older Received-Date. */
  arrivalDate?: string;
  sourceIp?: string;
  reportingMta?: string;
  reportedDomain: string[];
  reportedUri: string[];
  authenticationResults: string[];
  incidents?: number;
  /** Every field of the report. */
  fields: Fields;
  original?: OriginalMessage;
  truncated: boolean;
}

export type Report =
  | { kind: "dsn"; dsn: DeliveryReport }
  | { kind: "arf"; arf: FeedbackReport }
  | { kind: "none"; reason: string };

export interface ReportEnvelope {
  /** The envelope sender the message came with; "" for the null sender (<>), which bounces use. */
  mailFrom?: string;
}

const STATUS_TYPES = new Set(["message/delivery-status", "message/global-delivery-status"]);
const FEEDBACK_TYPES = new Set(["message/feedback-report"]);
const RETURNED_MESSAGE_TYPES = new Set(["message/rfc822", "message/global"]);
const RETURNED_HEADERS_TYPES = new Set(["text/rfc822-headers", "message/global-headers", "message/rfc822-headers"]);

/** Reads a report from a raw message. See the top of this file. */
export async function parseReport(raw: Uint8Array | string, envelope: ReportEnvelope = {}): Promise<Report> {
  return readReport(typeof raw === "string" ? Buffer.from(raw, "utf8") : Buffer.from(raw), envelope, 0);
}

async function readReport(raw: Buffer, envelope: ReportEnvelope, depth: number): Promise<Report> {
  const truncated = raw.length > MAX_REPORT_BYTES;
  let mail: ParsedMail;
  try {
    mail = await simpleParser(truncated ? raw.subarray(0, MAX_REPORT_BYTES) : raw, {
      // message/delivery-status as an attachment of its own, not mixed into the text.
      keepDeliveryStatus: true,
      // Nothing of the body is rendered: only the parts are wanted.
      skipHtmlToText: true,
      skipTextToHtml: true,
      skipImageLinks: true,
      skipTextLinks: true,
      // A returned message stays one attachment, its header section intact, even when inline.
      ignoreEmbedded: true,
      maxHeadSize: MAX_ORIGINAL_CHARS,
      maxChildNodes: 64,
    } as Parameters<typeof simpleParser>[1]);
  } catch (err) {
    return { kind: "none", reason: `unreadable MIME: ${(err as Error).message}` };
  }
  const parts = mail.attachments;
  const reportType = reportTypeOf(mail);
  const statusPart = parts.find((a) => STATUS_TYPES.has(a.contentType));
  const feedbackPart = parts.find((a) => FEEDBACK_TYPES.has(a.contentType));
  const original = originalIn(parts);
  if (feedbackPart && (reportType === "feedback-report" || !statusPart)) {
    return { kind: "arf", arf: { ...parseFeedbackFields(textOf(feedbackPart)), original, truncated } };
  }
  if (statusPart) {
    return {
      kind: "dsn",
      dsn: { source: "delivery-status", ...parseDeliveryStatus(textOf(statusPart)), original, truncated },
    };
  }
  // A report forwarded inside another message.
  if (depth < MAX_NESTING) {
    for (const inner of parts.filter((a) => RETURNED_MESSAGE_TYPES.has(a.contentType))) {
      const nested = await readReport(inner.content, {}, depth + 1);
      if (nested.kind === "arf" || (nested.kind === "dsn" && nested.dsn.source === "delivery-status")) return nested;
    }
  }
  if (depth === 0) {
    const text = textBounce(mail, envelope, original);
    if (text) return { kind: "dsn", dsn: { ...text, truncated } };
  }
  return {
    kind: "none",
    reason: reportType ? `a report of type ${reportType} without its part` : "neither a report nor a bounce",
  };
}

function reportTypeOf(mail: ParsedMail): string | undefined {
  const ct = mail.headers.get("content-type") as { value?: string; params?: Record<string, string> } | undefined;
  if (ct?.value?.toLowerCase() !== "multipart/report") return undefined;
  return ct.params?.["report-type"]?.toLowerCase();
}

function textOf(part: Attachment, maxChars = MAX_REPORT_BYTES): string {
  return part.content
    .subarray(0, maxChars * 4)
    .toString("utf8")
    .slice(0, maxChars);
}

/** The returned message's header section: from a message/rfc822 part, or a text/rfc822-headers one. */
function originalIn(parts: Attachment[]): OriginalMessage | undefined {
  const part = parts.find(
    (a) => RETURNED_MESSAGE_TYPES.has(a.contentType) || RETURNED_HEADERS_TYPES.has(a.contentType),
  );
  if (!part) return undefined;
  return originalFrom(textOf(part, MAX_ORIGINAL_CHARS), RETURNED_HEADERS_TYPES.has(part.contentType));
}

function originalFrom(text: string, headersOnly: boolean): OriginalMessage | undefined {
  const headers = headerSection(text, MAX_ORIGINAL_CHARS);
  if (Object.keys(headers).length === 0) return undefined;
  return { messageId: messageIdIn(first(headers, "message-id")), headers, headersOnly };
}

/** Fields that belong to a recipient's block (RFC 3464 section 2.3); the others are the message's. */
const RECIPIENT_FIELDS = new Set([
  "original-recipient",
  "final-recipient",
  "action",
  "status",
  "remote-mta",
  "diagnostic-code",
  "last-attempt-date",
  "final-log-id",
  "will-retry-until",
]);

/**
 * The per-message fields and the recipients of a message/delivery-status part's text. Tolerant of
 * what MTAs get wrong: blocks run together without an empty line (a second Final-Recipient or
 * Original-Recipient starts a new recipient), a per-message field inside a recipient's block, extra
 * empty lines, a missing per-message block.
 */
export function parseDeliveryStatus(text: string): {
  reportingMta?: string;
  arrivalDate?: string;
  originalEnvelopeId?: string;
  fields: Fields;
  recipients: RecipientStatus[];
} {
  const message: Field[] = [];
  const recipientBlocks: Field[][] = [];
  for (const block of fieldBlocks(text, MAX_RECIPIENTS + 8)) {
    let current: Field[] | undefined;
    for (const f of block) {
      if (!RECIPIENT_FIELDS.has(f.name)) {
        // An extension field (X-...) of a recipient's block stays with it.
        if (current && f.name.startsWith("x-")) current.push(f);
        else message.push(f);
        continue;
      }
      const startsAnother =
        (f.name === "final-recipient" || f.name === "original-recipient") && current?.some((g) => g.name === f.name);
      if (!current || startsAnother) {
        current = [];
        recipientBlocks.push(current);
      }
      current.push(f);
    }
  }
  const fields = byName(message);
  return {
    reportingMta: typedValue(first(fields, "reporting-mta"))?.value,
    arrivalDate: first(fields, "arrival-date"),
    originalEnvelopeId: first(fields, "original-envelope-id"),
    fields,
    recipients: recipientBlocks
      .slice(0, MAX_RECIPIENTS)
      .map((b) => recipientStatus(byName(b)))
      .filter((r) => r.finalRecipient || r.originalRecipient || r.status),
  };
}

const FAILED = new Set(["failed", "delayed"]);
const NOT_FAILED = new Set(["delivered", "relayed", "expanded"]);

function recipientStatus(fields: Fields): RecipientStatus {
  const action = /^\s*([A-Za-z-]+)/.exec(first(fields, "action") ?? "")?.[1]?.toLowerCase();
  const statusField = /^\s*([245]\.\d{1,3}\.\d{1,3})(?![\d.]*\d)/.exec(first(fields, "status") ?? "")?.[1];
  const status = statusField?.replace(/\.0+(\d)/g, ".$1");
  const diagnosticField = typedValue(first(fields, "diagnostic-code"));
  const diagnostic = diagnosticField && { type: diagnosticField.type, text: diagnosticField.value };
  const r: RecipientStatus = {
    finalRecipient: addressIn(first(fields, "final-recipient")),
    originalRecipient: addressIn(first(fields, "original-recipient")),
    action,
    status,
    remoteMta: typedValue(first(fields, "remote-mta"))?.value,
    diagnostic,
    fields,
  };
  // An unknown or missing Action is read from the status: 5 failed, 4 delayed, 2 not a failure.
  const failed =
    action && (FAILED.has(action) || NOT_FAILED.has(action)) ? FAILED.has(action) : /^[45]/.test(status ?? "");
  if (failed) {
    const final = action === "failed" || (action !== "delayed" && status?.startsWith("5"));
    r.classification = classify({ status, text: diagnostic?.text, final });
  }
  return r;
}

/** The fields of a message/feedback-report part's text (RFC 5965 section 3.1 and 3.2). */
export function parseFeedbackFields(text: string): Omit<FeedbackReport, "original" | "truncated"> {
  const fields = byName(fieldBlocks(text, 4).flat());
  const all = (name: string) => fields[name] ?? [];
  const incidents = Number(first(fields, "incidents"));
  return {
    feedbackType: /^\s*([A-Za-z0-9-]+)/.exec(first(fields, "feedback-type") ?? "")?.[1]?.toLowerCase(),
    userAgent: first(fields, "user-agent"),
    version: first(fields, "version"),
    originalMailFrom: addressIn(first(fields, "original-mail-from")),
    originalRcptTo: all("original-rcpt-to").flatMap((v) => addressIn(v) ?? []),
    originalEnvelopeId: first(fields, "original-envelope-id"),
    arrivalDate: first(fields, "arrival-date") ?? first(fields, "received-date"),
    sourceIp: first(fields, "source-ip")?.split(/\s/)[0],
    reportingMta: typedValue(first(fields, "reporting-mta"))?.value,
    reportedDomain: all("reported-domain"),
    reportedUri: all("reported-uri"),
    authenticationResults: all("authentication-results"),
    incidents: Number.isInteger(incidents) && incidents > 0 ? incidents : undefined,
    fields,
  };
}

/** Who sends bounces: the null sender, or a From of MAILER-DAEMON or postmaster. */
function fromTheMailSystem(mail: ParsedMail, envelope: ReportEnvelope): boolean {
  if (envelope.mailFrom === "") return true;
  const from = mail.from?.value[0]?.address?.toLowerCase() ?? "";
  return /^(mailer-daemon|postmaster)@/.test(from);
}

const BOUNCE_SUBJECT =
  /undeliver|returned mail|failure notice|delivery (status notification|failure|has failed|failed|problem)|mail delivery (failed|failure|system|subsystem)|non-?delivery|could not be delivered|not delivered/i;
const DELAY_WORDS = /\b(delayed|will (continue|keep) (trying|to try)|still trying|not yet been delivered|retry)\b/i;
const ADDRESS = /[^\s<>()[\]"',;:]+@[^\s<>()[\]"',;:]+\.[A-Za-z0-9-]+/;
const EMBEDDED_HEADERS = /^(Return-Path|Received|Message-ID|From|To|Subject|Date):/im;

/**
 * A bounce without a delivery-status part, read from its words: one that comes from the mail
 * system (null sender, MAILER-DAEMON, postmaster) or says so in its subject, and whose plain text
 * carries a status code (statusInText: "550 5.1.1", "(#5.1.1)", "550 User unknown"). The
 * recipient is the address on the line of the code or on one of the three lines above it; the
 * returned message, an attached one, else the first header section quoted in the text. An
 * auto-reply (out of office) has neither the sender nor the code and is not a bounce.
 */
function textBounce(
  mail: ParsedMail,
  envelope: ReportEnvelope,
  attached: OriginalMessage | undefined,
): Omit<DeliveryReport, "truncated"> | undefined {
  if (!fromTheMailSystem(mail, envelope) && !BOUNCE_SUBJECT.test(mail.subject ?? "")) return undefined;
  const text = (mail.text ?? "").slice(0, MAX_TEXT_CHARS);
  const found = statusInText(text);
  if (!found) return undefined;
  const lines = text.split(/\r?\n/);
  const needle = found.reply !== undefined ? String(found.reply) : found.status;
  const at = Math.max(
    0,
    lines.findIndex((l) => l.includes(found.status) || l.includes(needle)),
  );
  const diagnosticLine = lines[at]!.trim();
  const near = lines.slice(Math.max(0, at - 3), at + 1).reverse();
  const address = near.map((l) => ADDRESS.exec(l)?.[0]).find((a) => a !== undefined);
  const final = !(found.status.startsWith("4") && DELAY_WORDS.test(text));
  const recipient: RecipientStatus = {
    finalRecipient: address,
    action: final ? "failed" : "delayed",
    status: found.status,
    diagnostic: { text: diagnosticLine },
    classification: classify({ status: found.status, reply: found.reply, text: diagnosticLine, final }),
    fields: {},
  };
  const quoted = EMBEDDED_HEADERS.exec(text);
  const original = attached ?? (quoted ? originalFrom(text.slice(quoted.index), false) : undefined);
  return { source: "text", fields: {}, recipients: [recipient], original };
}
