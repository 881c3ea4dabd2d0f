// A message's header fields as DKIM sees them, and the "relaxed" canonicalization of a field
// and of the body (RFC 6376 section 3.4.2 and 3.4.4). Strings here are "binary" (latin1): one
// character per byte, so 8-bit bytes are hashed as they are sent.

export class MessageFormatError extends Error {}

export interface HeaderField {
  /** The name as written. */
  name: string;
  /** The field as written, name to value, folded lines included, without its final CRLF. */
  raw: string;
}

export interface ParsedMessage {
  fields: HeaderField[];
  /** The body, from after the empty line that ends the header ("" when there is none). */
  body: string;
}

const FIELD_NAME = /^[!-9;-~]+$/;

/** Splits a message with CRLF line ends into its header fields and its body. */
export function parseMessage(message: string): ParsedMessage {
  const bare = /\r(?!\n)|(?<!\r)\n/.exec(message);
  if (bare)
    throw new MessageFormatError(
      `the message has a bare ${bare[0] === "\r" ? "CR" : "LF"} at byte ${bare.index}: lines must end in CRLF`,
    );
  const end = message.startsWith("\r\n") ? 0 : message.indexOf("\r\n\r\n");
  const header = end < 0 ? message : message.slice(0, end + (end === 0 ? 0 : 2));
  const body = end < 0 ? "" : message.slice(end + (end === 0 ? 2 : 4));
  const fields: HeaderField[] = [];
  const lines = header.split("\r\n");
  if (lines[lines.length - 1] === "") lines.pop();
  for (const [i, line] of lines.entries()) {
    if (line.startsWith(" ") || line.startsWith("\t")) {
      const last = fields[fields.length - 1];
      if (last === undefined) throw new MessageFormatError("the message's first header line is a continuation line");
      last.raw += `\r\n${line}`;
      continue;
    }
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon).replace(/[ \t]+$/, "") : "";
    if (!FIELD_NAME.test(name)) throw new MessageFormatError(`header line ${i + 1} of the message is not a field`);
    fields.push({ name, raw: line });
  }
  return { fields, body };
}

/** A field's name, lower-cased, as h= and the canonical form compare it. */
export const fieldKey = (field: HeaderField) => field.name.toLowerCase();

/** The field's value as written, after its colon (still folded). */
export function fieldValue(field: HeaderField): string {
  return field.raw.slice(field.raw.indexOf(":") + 1);
}

/** A field, relaxed: name lower-cased, value unfolded, runs of whitespace one space, none at the ends; no CRLF. */
export function relaxedField(field: HeaderField): string {
  const value = fieldValue(field)
    .replace(/\r\n/g, "")
    .replace(/[ \t]+/g, " ")
    .replace(/^ | $/g, "");
  return `${fieldKey(field)}:${value}`;
}

/**
 * The body, relaxed: no whitespace at the ends of lines, runs of whitespace one space, no
 * empty lines at the end, and a non-empty body ends in CRLF. One pass that touches only what
 * changes (a single space stays; a 100 KB body takes a tenth of the time of one replace per
 * rule), then the end trimmed by hand.
 */
export function relaxedBody(body: string): string {
  const folded = body.replace(/[ \t]+\r\n|\t[ \t]*| [ \t]+/g, (run) => (run.endsWith("\n") ? "\r\n" : " "));
  let end = folded.length;
  while (end > 0 && (folded.charCodeAt(end - 1) === 0x20 || folded.charCodeAt(end - 1) === 0x09)) end--;
  while (end >= 2 && folded.charCodeAt(end - 1) === 0x0a && folded.charCodeAt(end - 2) === 0x0d) end -= 2;
  return end === 0 ? "" : `${folded.slice(0, end)}\r\n`;
}
