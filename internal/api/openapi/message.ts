import { ALLOWED_HEADER, MAX_HEADER_NAME, MAX_HEADER_VALUE, MAX_HEADERS, OUR_HEADER } from "../../mail/headers";
import { ATEXT, WHITE_SPACE } from "./patterns";
import type { Schema } from "./types";

// What a message's fields admit, for a send, a campaign and a workflow email step alike: the
// rules the API checks stated as schemas, so that what the document admits the API accepts.

/** A dot-atom mailbox whose domain has a dot: `local@example.com`. */
const ADDR = `${ATEXT}+(\\.${ATEXT}+)*@${ATEXT}+(\\.${ATEXT}+)+`;
/** A display name: words (dots between or after them, as in `Acme Inc.`) or one quoted string. */
const DISPLAY_NAME = `(${ATEXT}+([ .]+${ATEXT}+)*\\.?|"[^"\\\\\\x00-\\x1F\\x7F]*")`;

/**
 * One address, as `addr`, `<addr>` or `Name <addr>`. Every string it admits the API's address
 * parser accepts (a property test holds them to each other); each part is separated from the
 * next by a character it cannot contain, so matching takes time linear in the length.
 */
export const MAILBOX: Schema = {
  type: "string",
  maxLength: 320,
  pattern: `^((${DISPLAY_NAME} *)?<${ADDR}>|${ADDR})$`,
  description: 'One address, as `addr` or `"Name <addr>"` (UTF-8 allowed); at most 320 characters.',
};

/** Something besides white space. */
const NOT_BLANK = `[^${WHITE_SPACE}]`;
/** One line with something besides white space. */
const ONE_LINE = { allOf: [{ pattern: "^[^\\r\\n]*$" }, { pattern: NOT_BLANK }] };

export const SUBJECT: Schema = {
  type: "string",
  maxLength: 998,
  ...ONE_LINE,
  description: "One line, not blank.",
};

/** A name: not blank, at most 256 characters. */
export const NAME: Schema = { type: "string", maxLength: 256, pattern: NOT_BLANK };

/**
 * The rules of a message's parts: one of html, text or markdown not empty, and markdown not
 * with html (it is rendered into html).
 */
export const MESSAGE_PARTS: Schema = {
  anyOf: [
    { required: ["html"], properties: { html: { minLength: 1 } } },
    { required: ["text"], properties: { text: { minLength: 1 } } },
    { required: ["markdown"], properties: { markdown: { minLength: 1 } } },
  ],
  not: { required: ["html", "markdown"], properties: { html: { minLength: 1 }, markdown: { minLength: 1 } } },
};

/** A case-insensitive regular expression as one a schema can state (patterns take no flags): `ab` as `[aA][bB]`. */
function caseless(source: string): string {
  let inClass = false;
  let out = "";
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === "\\") {
      out += c + source[++i];
      continue;
    }
    if (c === "[") inClass = true;
    if (c === "]") inClass = false;
    out += !inClass && /[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c;
  }
  return out;
}

/**
 * A send's extra headers: names from the allow-list (whose characters are all a header name's:
 * its length is the one rule of HEADER_NAME left to state), one-line values.
 */
export const EXTRA_HEADERS: Schema = {
  type: "object",
  maxProperties: MAX_HEADERS,
  propertyNames: {
    maxLength: MAX_HEADER_NAME,
    pattern: caseless(ALLOWED_HEADER.source),
    not: { pattern: caseless(OUR_HEADER.source) },
    examples: ["X-Campaign", "List-Id", "In-Reply-To", "Feedback-ID"],
  },
  additionalProperties: { type: "string", maxLength: MAX_HEADER_VALUE, pattern: "^[^\\r\\n]*$" },
};
