// The extra headers a send may carry, for both fronts: an allow-list, so a header nobody
// thought of (Content-*, Resent-*, DKIM-Signature, Authentication-Results...) is refused
// rather than passed on. Everything the message is built from comes from the request's own
// fields; X-Mailcore-* is ours (tags).

export const ALLOWED_HEADER =
  /^(x-(?!mailcore-)[!-9;-~]+|list-(id|unsubscribe|unsubscribe-post|help|subscribe|post|owner|archive)|in-reply-to|references|auto-submitted|precedence|feedback-id)$/i;

/** Header names as the API accepts them (printable ASCII without ':', at most 76). */
export const HEADER_NAME = /^[!-9;-~]{1,76}$/;
export const MAX_HEADERS = 50;
/** A header value is one line of at most this many characters (RFC 5322 2.1.1). */
export const MAX_HEADER_VALUE = 998;

export const ALLOWED_HEADERS_TEXT =
  "X-* (but not X-Mailcore-*), List-Id, List-Unsubscribe, List-Unsubscribe-Post, List-Help, List-Subscribe, List-Post, List-Owner, List-Archive, In-Reply-To, References, Auto-Submitted, Precedence and Feedback-ID";

export function isAllowedHeader(name: string): boolean {
  return HEADER_NAME.test(name) && ALLOWED_HEADER.test(name);
}
