import emailAddresses from "email-addresses";

// One mailbox of an address field ("a@b.example" or "Name <a@b.example>"), as the send request
// reads it. The parser (email-addresses, RFC 5322 with RFC 6532) backtracks: 0.2 to 0.4 ms for a
// plain address once warm, milliseconds for a display name of many words, about a millisecond a
// character on nested comments. Most addresses are plain, and for those a pattern gives the
// parser's answer in linear time (mailbox.test.ts holds the two to the same answers); anything
// else (quotes, comments, non-ASCII, a group) goes to the parser.

/** RFC 5322 atext (ASCII): what an atom is made of. */
const ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]";
const DOT_ATOM = `${ATEXT}+(?:\\.${ATEXT}+)*`;
/** local@domain, the domain with at least one dot (the parser's rejectTLD). */
const ADDR_SPEC = `${DOT_ATOM}@${ATEXT}+(?:\\.${ATEXT}+)+`;
/** A display name of atoms, one space between them. */
const PHRASE = `${ATEXT}+(?: ${ATEXT}+)*`;
/**
 * The plain forms: an addr-spec alone, or in angle brackets after an optional display name. The
 * character classes never overlap their separators, so matching is linear.
 */
const PLAIN = new RegExp(`^(?:(${ADDR_SPEC})|(?:${PHRASE} )?<(${ADDR_SPEC})>)$`);

/** The address of a plain mailbox (see PLAIN), or undefined when the input is not of a plain form. */
export function plainMailbox(input: string): string | undefined {
  const m = PLAIN.exec(input);
  return m ? (m[1] ?? m[2]) : undefined;
}

/** Whether an address field's value can be read without the parser (plainMailbox), as mailboxAddress reads it: trimmed. */
export function isPlainMailbox(value: unknown): boolean {
  return typeof value === "string" && PLAIN.test(value.trim());
}

/**
 * The bare address of one mailbox, or undefined when the input is not exactly one mailbox (a
 * group, a list, not an address). Throws what the parser throws (a RangeError past the stack).
 */
export function mailboxAddress(input: string): string | undefined {
  const plain = plainMailbox(input);
  if (plain !== undefined) return plain;
  const parsed = emailAddresses.parseOneAddress({ input, rfc6532: true, rejectTLD: true });
  return parsed?.type === "mailbox" ? parsed.address : undefined;
}
