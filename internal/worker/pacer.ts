import { systemTimerClock, type TimerClock } from "../clock/clock";

/**
 * How long past its arrival a message is held at most: its lane's lead is two seconds at most,
 * and a worker whose clock runs behind the daemon's must not hold messages for the difference.
 */
export const MAX_HOLD_MS = 3_000;

interface Waiting {
  notBefore: number;
  rate: number;
  go: () => void;
}

/**
 * A relay may see one more than the lane's rate in any 1000 ms while a worker catches up, and
 * the window is counted this much longer, for the relay's clocks (a file's time comes from the
 * kernel's coarse clock, a few ms behind).
 */
const WINDOW_MARGIN_MS = 10;

/**
 * Starts one lane's deliveries in this worker at their turns. A turn comes at the message's slot
 * (the lanes release messages ahead of their slots), and no sooner than half a slot after the
 * lane's previous start, nor than 1010 ms after the start `rate + 1` starts back. On time, the
 * relay sees exactly the lane's pacing. Late (a stall of this worker, a late lease), the
 * deliveries go as soon as that allows: never a burst, never more than `rate + 1` in any
 * 1000 ms, catching up at about 0.6 messages a second (the lane's slots keep coming at its rate,
 * so a lag can only shrink by what the relay may take above it).
 *
 * A start runs inside the turn, and its time is taken when it returns: a delivery that begins
 * synchronously (the file sink's write, the relay's first command) is then counted no earlier
 * than a relay sees it, however long the start took or the process waited for a core.
 */
export class LanePacer {
  private readonly waiting: Waiting[] = [];
  /** The last `rate + 1` starts, oldest first. */
  private readonly starts: number[] = [];
  private cancel: (() => void) | undefined;
  private armedFor = Number.POSITIVE_INFINITY;

  constructor(private readonly time: TimerClock = systemTimerClock) {}

  /**
   * Runs start at the message's turn and resolves with what it returned. slotMs 0: no slot
   * (start as soon as the pacing allows); rate 0: no rate.
   */
  turn<T>(slotMs: number, rate: number, start: () => T): Promise<T> {
    const notBefore = Math.min(slotMs, this.time.nowMs() + MAX_HOLD_MS);
    return new Promise((resolve, reject) => {
      const go = () => {
        try {
          resolve(start());
        } catch (err) {
          reject(err);
        }
      };
      // In slot order; a message that arrives late takes its place among those waiting.
      let i = this.waiting.length;
      while (i > 0 && this.waiting[i - 1]!.notBefore > notBefore) i--;
      this.waiting.splice(i, 0, { notBefore, rate, go });
      this.arm();
    });
  }

  /** Gives every waiting message its turn at once (the worker stops). */
  release(): void {
    this.cancel?.();
    this.armedFor = Number.POSITIVE_INFINITY;
    for (const w of this.waiting.splice(0)) w.go();
  }

  /** When the first waiting message may start. */
  private turnOf(w: Waiting): number {
    let at = w.notBefore;
    const last = this.starts.at(-1);
    if (w.rate > 0 && last !== undefined) {
      at = Math.max(at, last + 500 / w.rate);
      const back = this.starts[this.starts.length - (w.rate + 1)];
      if (back !== undefined) at = Math.max(at, back + 1_000 + WINDOW_MARGIN_MS);
    }
    return at;
  }

  private arm(): void {
    const head = this.waiting[0];
    if (head === undefined) return;
    const at = this.turnOf(head);
    if (at >= this.armedFor) return;
    this.cancel?.();
    this.armedFor = at;
    this.cancel = this.time.setTimer(at - this.time.nowMs(), () => this.fire());
  }

  private fire(): void {
    this.armedFor = Number.POSITIVE_INFINITY;
    this.cancel = undefined;
    const head = this.waiting[0];
    if (head === undefined) return;
    if (this.turnOf(head) <= this.time.nowMs()) {
      this.waiting.shift();
      head.go();
      this.starts.push(this.time.nowMs());
      if (this.starts.length > head.rate + 1) this.starts.shift();
    }
    this.arm();
  }
}
