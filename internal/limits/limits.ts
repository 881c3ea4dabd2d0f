// The size limits the HTTP API and the SMTP front share: a message one front takes, the other
// must take too (both take messages of up to 1 MB).

/** The largest request body the API accepts. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** The largest message the SMTP front takes, advertised as SIZE and enforced on the stream. */
export const MAX_MESSAGE_BYTES = MAX_BODY_BYTES;
