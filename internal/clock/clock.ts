// Clock is where every algorithm takes "now" from: production passes systemClock,
// tests pass a ManualClock they move, so a 24-hour window is tested in milliseconds.
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

/** A clock with timers: what a pacer (of lanes, of destinations) waits on. */
export interface TimerClock extends Clock {
  /** Calls fn after ms; returns what cancels it. */
  setTimer(ms: number, fn: () => void): () => void;
}

export const systemTimerClock: TimerClock = {
  nowMs: () => Date.now(),
  setTimer(ms, fn) {
    const timer = setTimeout(fn, timerDelay(ms));
    return () => clearTimeout(timer);
  },
};

export class ManualClock implements Clock {
  constructor(private ms: number = Date.UTC(2026, 0, 1)) {}
  nowMs(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** The longest delay a timer keeps (2^31 - 1 ms): a longer one fires after 1 ms, with a warning. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A delay as a timer takes it: from 0 to MAX_TIMER_MS, NaN as 0. Every timer whose delay is
 * computed takes it through here: a moment already due, read from a clock a few microseconds
 * after "due at" was, is a negative delay, which a timer waits as 1 ms after printing a
 * TimeoutNegativeWarning on stderr (a line no log collector parses).
 */
export function timerDelay(ms: number): number {
  return ms > 0 ? Math.min(ms, MAX_TIMER_MS) : 0;
}

/** The delay from nowMs until atMs (both of one clock), as a timer takes it: see timerDelay. */
export function delayUntil(atMs: number, nowMs: number): number {
  return timerDelay(atMs - nowMs);
}
