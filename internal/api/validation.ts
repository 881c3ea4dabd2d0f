import { JobTimeout, WorkerPool } from "../workerpool/pool";
import { InvalidField } from "./invalid_field";
import { isPlainMailbox } from "./mailbox";
import { parseSendRequest, type SendInput, type Validated } from "./send_request";

export interface SendValidation {
  /** The validated send, or InvalidField; `key` (the organization) shares the threads fairly. */
  validate(key: string, body: unknown): Promise<SendInput>;
  close(): Promise<void>;
}

/**
 * The most content (html, text and subject, in characters) a body validated on the event loop
 * may have: the work on it is linear (a fingerprint of it), well under a millisecond.
 */
export const INLINE_CONTENT_CHARS = 64 * 1024;

const given = (v: unknown) => v !== undefined && v !== null && v !== "";

/**
 * Whether a body's validation cannot be slow, and so runs on the event loop: its address fields
 * are of the plain forms (read by a pattern, not the backtracking parser: mailbox.ts), it has no
 * Markdown to render, and its content is small. What is not an object is refused at once.
 */
export function validatesInline(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return true;
  const b = body as Record<string, unknown>;
  if (given(b.markdown)) return false;
  const to = Array.isArray(b.to) && b.to.length === 1 ? b.to[0] : b.to;
  if (!isPlainMailbox(b.from) || !isPlainMailbox(to) || (given(b.replyTo) && !isPlainMailbox(b.replyTo))) return false;
  let content = 0;
  for (const field of [b.html, b.text, b.subject]) if (typeof field === "string") content += field.length;
  return content <= INLINE_CONTENT_CHARS;
}

/**
 * Validates send bodies, the ones that could be slow on worker threads under a time cap.
 * Parsing addresses and rendering Markdown can take seconds on hostile input (measured: 26 s
 * for 800 KB of "*a"); that never touches the event loop, and a body that needs more than the
 * cap is refused (422). A plain body (validatesInline) is validated on the event loop: the hop
 * to a thread and back cost more than its validation.
 */
export function offloadedValidation(o: { workers: number; timeoutMs: number }): SendValidation {
  const pool = new WorkerPool<unknown, Validated>({
    script: new URL("./validation_worker.ts", import.meta.url).href,
    size: o.workers,
    timeoutMs: o.timeoutMs,
  });
  return {
    async validate(key, body) {
      if (validatesInline(body)) return parseSendRequest(body);
      let v: Validated;
      try {
        v = await pool.run(key, body);
      } catch (err) {
        if (!(err instanceof JobTimeout)) throw err;
        const field = typeof (body as { markdown?: unknown }).markdown === "string" ? "markdown" : "body";
        throw new InvalidField(
          field,
          `took longer than ${o.timeoutMs} ms to validate${field === "markdown" ? " and render" : ""}; simplify it${field === "markdown" ? " or send html" : ""}`,
        );
      }
      if (!v.ok) throw new InvalidField(v.field, v.reason);
      return v.input;
    },
    close: () => pool.close(),
  };
}
