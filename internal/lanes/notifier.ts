/** Wakes everything waiting for "something changed" (a release, an ack), or times out. */
export class Notifier {
  private waiters = new Set<() => void>();

  wait(timeoutMs: number, signal: AbortSignal): Promise<void> {
    return new Promise((done) => {
      const finish = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", finish);
        this.waiters.delete(finish);
        done();
      };
      const timer = setTimeout(finish, timeoutMs);
      signal.addEventListener("abort", finish);
      this.waiters.add(finish);
    });
  }

  notifyAll(): void {
    for (const w of [...this.waiters]) w();
  }
}
