// Virtual time for the tests of code that paces on a clock and sleeps (the lane scheduler, the
// worker's pacer): the test moves the clock from timer to timer, so "40 a second" is checked
// over minutes in milliseconds, exactly, whatever else the machine is doing.

interface Timer {
  at: number;
  fire: () => void;
}

/** Lets every promise chain that can go on without a timer go on. */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

export class VirtualTime {
  private timers: Timer[] = [];
  /** How far the wall clock was stepped (NTP, a VM resume); timers keep to the monotonic clock. */
  private wallStep = 0;

  /** now: the monotonic clock, which the timers keep to. */
  constructor(public now: number = Date.UTC(2026, 0, 1)) {}

  /** The wall clock. */
  readonly nowMs = (): number => this.now + this.wallStep;

  /** Resolves once the clock reaches now + ms, or at once when signal aborts. */
  readonly sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer: Timer = {
        at: this.now + Math.max(0, ms),
        fire: () => {
          signal?.removeEventListener("abort", abort);
          resolve();
        },
      };
      const abort = () => {
        this.timers = this.timers.filter((t) => t !== timer);
        resolve();
      };
      signal?.addEventListener("abort", abort);
      this.timers.push(timer);
    });

  /** Calls fn once the clock reaches now + ms; returns what cancels it. */
  readonly setTimer = (ms: number, fn: () => void): (() => void) => {
    const timer: Timer = { at: this.now + Math.max(0, ms), fire: fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  };

  /** Moves the clock from timer to timer up to `until`, letting everything woken run after each. */
  async runUntil(until: number): Promise<void> {
    for (;;) {
      await settle();
      const next = this.timers.reduce<Timer | undefined>((a, t) => (a === undefined || t.at < a.at ? t : a), undefined);
      if (next === undefined || next.at > until) {
        this.now = Math.max(this.now, until);
        return;
      }
      this.timers = this.timers.filter((t) => t !== next);
      this.now = Math.max(this.now, next.at);
      next.fire();
    }
  }

  /** Moves the clock without firing timers: time that passes while the code under test is busy. */
  stall(ms: number): void {
    this.now += ms;
  }

  /** Steps the wall clock alone. */
  stepWall(ms: number): void {
    this.wallStep += ms;
  }
}
