import { timerDelay } from "../clock/clock";

/**
 * Wakes everything waiting for "something changed" (a release, an ack), or times out. A waiter
 * passes the version it last looked at, so a change that came between its look and its wait is
 * not missed.
 */
export class Notifier {
  private waiters = new Set<() => void>();
  /** How many changes there have been. */
  version = 0;

  wait(timeoutMs: number, signal: AbortSignal, seen = this.version): Promise<void> {
    if (seen !== this.version || signal.aborted) return Promise.resolve();
    return new Promise((done) => {
      const finish = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", finish);
        this.waiters.delete(finish);
        done();
      };
      const timer = setTimeout(finish, timerDelay(timeoutMs));
      signal.addEventListener("abort", finish);
      this.waiters.add(finish);
    });
  }

  notifyAll(): void {
    this.version++;
    for (const w of [...this.waiters]) w();
  }
}
