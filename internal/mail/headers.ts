// The extra headers a send may carry, for both fronts: an allow-list, so a header nobody
// thought of (Content-*, Resent-*, DKIM-Signature, Authentication-Results...) is refused
// rather than passed on. Everything the message is built from comes from the request's own
// fields; X-Mailcore-* is ours (tags).

/** The header names a send may set (X-Mailcore-* aside: OUR_HEADER); case aside. */
export const ALLOWED_HEADER =
  /^(x-[!-9;-~]+|list-(id|unsubscribe|unsubscribe-post|help|subscribe|post|owner|archive)|in-reply-to|references|auto-submitted|precedence|feedback-id)$/i;
/** X-Mailcore-*: the service's own headers (the tags), never a sender's. */
export const OUR_HEADER = /^x-mailcore-/i;

export const MAX_HEADER_NAME = 76;
/** Header names as the API accepts them (printable ASCII without ':', at most 76). */
export const HEADER_NAME = new RegExp(`^[!-9;-~]{1,${MAX_HEADER_NAME}}$`);
export const MAX_HEADERS = 50;
/** A header value is one line of at most this many characters (RFC 5322 2.1.1). */
export const MAX_HEADER_VALUE = 998;

export const ALLOWED_HEADERS_TEXT =
  "X-* (but not X-Mailcore-*), List-Id, List-Unsubscribe, List-Unsubscribe-Post, List-Help, List-Subscribe, List-Post, List-Owner, List-Archive, In-Reply-To, References, Auto-Submitted, Precedence and Feedback-ID";

export function isAllowedHeader(name: string): boolean {
  return HEADER_NAME.test(name) && ALLOWED_HEADER.test(name) && !OUR_HEADER.test(name);
}
