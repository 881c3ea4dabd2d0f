import { storedDomainName } from "../../mail/domain_name";
import { KEPT_ADDRESS, TAG_NAME } from "../subscribers";

// JSON Schema leaves a pattern to each validator's own regular expressions, and recommends a
// subset that all of them read alike. The document's patterns keep to it, so that a client in
// any language can validate requests and answers with them: characters, classes and ranges,
// quantifiers, the anchors ^ and $, groups (capturing: "(?:" is not in the subset) and
// alternation; the only escapes are of syntax characters, \t \n \r and \xHH. No \d \s \w (each
// engine has its own sets), no \p{...} (Python's re has none), no lookaround, no backreference.
// What such a pattern cannot say (Unicode's letters) is a format of the document's own, below:
// the pattern admits a superset, the description says the rule in words, and the API checks the
// format (contract.ts gives Ajv these).

/**
 * JavaScript's white space as the characters of a class: what its \s matches and String trim
 * removes. Spelled out because other engines' \s differ (Python's takes in \x1C-\x1F and \x85,
 * and leaves out U+FEFF); the characters beyond ASCII are themselves, not escapes.
 */
export const WHITE_SPACE = "\\t\\n\\x0B\\x0C\\r \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF";

/**
 * One character of a dot-atom (RFC 5322 atext: ASCII letters, digits and !#$%&'*+/=?^_`{|}~-),
 * or any character beyond ASCII (RFC 6532).
 */
export const ATEXT = '[^\\x00-\\x20\\x7F"(),.:;<>@\\[\\\\\\]]';

/** A host label's first and last character: an ASCII letter or digit, or any character beyond ASCII. */
const LABEL_EDGE = "[^\\x00-\\x2F\\x3A-\\x40\\x5B-\\x60\\x7B-\\x7F]";
/** A host label's inner characters: those and `-`. */
const LABEL_INNER = "[^\\x00-\\x2C\\x2E\\x2F\\x3A-\\x40\\x5B-\\x60\\x7B-\\x7F]";
const LABEL = `${LABEL_EDGE}(${LABEL_INNER}*${LABEL_EDGE})?`;

/**
 * A subscriber's address, unanchored: a dot-atom local part at a host of two labels or more.
 * Beyond ASCII it admits any character; the format subscriber-email narrows those to letters,
 * digits and marks.
 */
export const SUBSCRIBER_ADDRESS = `${ATEXT}+(\\.${ATEXT}+)*@${LABEL}(\\.${LABEL})+`;

/** A domain name's last label starts with a letter: an ASCII letter, or any character beyond ASCII. */
const TLD_FIRST = "[^\\x00-\\x40\\x5B-\\x60\\x7B-\\x7F]";
/** A label of at most 63 characters. */
const SHORT_LABEL = `${LABEL_EDGE}(${LABEL_INNER}{0,61}${LABEL_EDGE})?`;

/**
 * A sending domain's name as a request gives it: labels of at most 63 characters, the last
 * starting with a letter, a final dot and white space around allowed; beyond ASCII any
 * character. The format domain-name narrows those to what converts to punycode (IDNA).
 */
export const DOMAIN_NAME_PATTERN = `^[${WHITE_SPACE}]*(${SHORT_LABEL}\\.)+${TLD_FIRST}(${LABEL_INNER}{0,61}${LABEL_EDGE})?\\.?[${WHITE_SPACE}]*$`;

/**
 * A tag name: 1 to 64 of ASCII letters, digits, space, `_` and `-`, and of any character beyond
 * ASCII; the format tag-name narrows those to letters and digits.
 */
export const TAG_NAME_PATTERN = "^[^\\x00-\\x1F\\x21-\\x2C\\x2E\\x2F\\x3A-\\x40\\x5B-\\x5E\\x60\\x7B-\\x7F]{1,64}$";

export interface ApiFormat {
  /**
   * The rule, in the regular expressions of the API's own checks (JavaScript's, with \p{...});
   * values are generated from it.
   */
  regex: RegExp;
  /** Where the regular expression admits more than the rule (a name IDNA refuses): the rule itself. */
  accepts?: (value: string) => boolean;
  /** Why a value is refused, as a 422 says it after the field's name. */
  refusal: string;
}

/** The document's own formats, each beside a portable pattern that admits a superset of it. */
export const API_FORMATS: Record<string, ApiFormat> = {
  "tag-name": {
    regex: TAG_NAME,
    refusal: "is not a tag name (1 to 64 letters, digits, spaces, _ and -)",
  },
  "domain-name": {
    regex:
      /^\s*(?:[\p{L}\p{N}](?:[\p{L}\p{N}\p{M}-]{0,61}[\p{L}\p{N}])?\.)+\p{L}(?:[\p{L}\p{N}\p{M}-]{0,61}[\p{L}\p{N}])?\.?\s*$/u,
    accepts: (value) => storedDomainName(value) !== undefined,
    refusal: "is not a domain name (labels of letters, digits and inner hyphens, the last starting with a letter)",
  },
  "subscriber-email": {
    // White space around it aside: an upsert trims the address (an answer has none, and says its
    // rule in words beside the pattern alone).
    regex: new RegExp(`^\\s*${KEPT_ADDRESS}\\s*$`, "u"),
    refusal: "is not an email address (one bare address: local@host.example; letters, digits and marks of any script)",
  },
};
