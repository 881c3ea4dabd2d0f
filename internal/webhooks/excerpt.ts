// What an attempt keeps of the receiver's answer: its first characters, enough to tell a
// "ok" from an HTML error page or a JSON error, never the whole of a huge answer.

/** Characters (code points) kept of an answer's body. */
export const EXCERPT_CHARS = 256;
/** Bytes read of an answer's body at most; the rest is never read. */
export const EXCERPT_READ_BYTES = 4_096;

// C0 and C1 control characters and DEL, but newline and tab.
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;

/** The text cleaned of control characters (but newline and tab) and cut to EXCERPT_CHARS code points. */
export function excerptOf(text: string): string {
  const clean = text.replace(CONTROL, "");
  if (clean.length <= EXCERPT_CHARS) return clean;
  return Array.from(clean).slice(0, EXCERPT_CHARS).join("");
}

/**
 * Reads the start of the answer's body (EXCERPT_READ_BYTES at most, stopping as soon as the excerpt
 * is full) as UTF-8, invalid bytes replaced, and cancels the rest. A body that stops coming (the
 * fetch's time limit ends it) or breaks off keeps what came before.
 */
export async function readExcerpt(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const decoder = new TextDecoder("utf-8");
  let text = "";
  let read = 0;
  try {
    while (read < EXCERPT_READ_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      const bytes = value.subarray(0, EXCERPT_READ_BYTES - read);
      read += bytes.length;
      // stream: a character split between chunks is decoded whole; one cut by the byte limit is dropped.
      text += decoder.decode(bytes, { stream: true });
      if (Array.from(text.replace(CONTROL, "")).length >= EXCERPT_CHARS) break;
    }
  } catch {
    // The body broke off or timed out: keep what came.
  }
  reader.cancel().catch(() => {});
  return excerptOf(text);
}
