import { JobTimeout, WorkerPool } from "../workerpool/pool";
import { InvalidField } from "./invalid_field";
import type { SendInput, Validated } from "./send_request";

export interface SendValidation {
  /** The validated send, or InvalidField; `key` (the organization) shares the threads fairly. */
  validate(key: string, body: unknown): Promise<SendInput>;
  close(): Promise<void>;
}

/**
 * Validates send bodies on worker threads under a time cap. Parsing addresses and rendering
 * Markdown can take seconds on hostile input (measured: 26 s for 800 KB of "*a"); here it
 * never touches the event loop, and a body that needs more than the cap is refused (422).
 */
export function offloadedValidation(o: { workers: number; timeoutMs: number }): SendValidation {
  const pool = new WorkerPool<unknown, Validated>({
    script: new URL("./validation_worker.ts", import.meta.url).href,
    size: o.workers,
    timeoutMs: o.timeoutMs,
  });
  return {
    async validate(key, body) {
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
