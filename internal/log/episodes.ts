import type { Fields, Logger } from "./log";

const SUMMARY_EVERY_MS = 10_000;

/**
 * Logs a failure that repeats many times a second (a lane slot, a recovery round, a request
 * while a dependency is down) as an episode: one line when it starts, a summary every 10 s
 * while it lasts, one line when it ends. An outage is then a handful of lines, not 80 a second.
 */
export class FailureEpisode {
  private since: number | undefined;
  private failures = 0;
  private summarizedAt = 0;

  constructor(
    private readonly log: Logger,
    /** What fails, as the start of a sentence: "lane release", "admission". */
    private readonly what: string,
    private readonly fields: Fields = {},
    /** A monotonic clock in ms. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  failed(err: Error): void {
    const now = this.now();
    this.failures++;
    if (this.since === undefined) {
      this.since = this.summarizedAt = now;
      this.log.warn(`${this.what} failing`, { ...this.fields, error: err.message });
    } else if (now - this.summarizedAt >= SUMMARY_EVERY_MS) {
      this.summarizedAt = now;
      this.log.warn(`${this.what} still failing`, {
        ...this.fields,
        error: err.message,
        failures: this.failures,
        downMs: Math.round(now - this.since),
      });
    }
  }

  succeeded(): void {
    if (this.since === undefined) return;
    this.log.info(`${this.what} recovered`, {
      ...this.fields,
      failures: this.failures,
      downMs: Math.round(this.now() - this.since),
    });
    this.since = undefined;
    this.failures = 0;
  }
}
