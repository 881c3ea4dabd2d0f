// Failed AUTH attempts per client address, across connections (measured once: 19 tries a second
// from one address that reconnected after every third failure). Each failure fills the
// address's bucket by one and the bucket drains by one a minute. From 30% of the limit on (the
// 3rd failure of 10) the 535 reply is held back (250 ms, doubling up to 4 s); at the limit the
// address is refused (421) at connect and at AUTH until one failure has drained (a minute). A
// success resets nothing: a valid token does not buy more guesses. In memory, per SMTP front.

const DRAIN_MS_PER_FAILURE = 60_000;
const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 4_000;
/** Addresses tracked at most; past this, drained ones are forgotten first. */
const MAX_TRACKED = 100_000;

interface Bucket {
  level: number;
  atMs: number;
}

export class AuthThrottle {
  private readonly buckets = new Map<string, Bucket>();

  private readonly slowFrom: number;

  constructor(
    /** Failures at which the address is refused (SMTP_AUTH_FAILURES_PER_IP). */
    private readonly refuseAt: number,
    private readonly now: () => number = Date.now,
  ) {
    this.slowFrom = Math.max(1, Math.round(refuseAt * 0.3));
  }

  private levelOf(ip: string, now: number): number {
    const b = this.buckets.get(ip);
    if (!b) return 0;
    const level = Math.max(0, b.level - (now - b.atMs) / DRAIN_MS_PER_FAILURE);
    if (level === 0) this.buckets.delete(ip);
    return level;
  }

  /** Seconds until the address may try again; 0 when it may now. */
  refusedForSeconds(ip: string): number {
    const level = this.levelOf(ip, this.now());
    const over = level - (this.refuseAt - 1);
    return over <= 0 ? 0 : Math.ceil(Math.round(over * DRAIN_MS_PER_FAILURE) / 1_000);
  }

  /** The address has failures that have not drained yet. */
  hasFailures(ip: string): boolean {
    return this.levelOf(ip, this.now()) > 0;
  }

  /** Records a failure; returns how long to hold back its reply. */
  failed(ip: string): number {
    const now = this.now();
    const level = this.levelOf(ip, now) + 1;
    if (this.buckets.size >= MAX_TRACKED) this.forgetDrained(now);
    this.buckets.set(ip, { level, atMs: now });
    const n = Math.floor(level);
    return n < this.slowFrom ? 0 : Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (n - this.slowFrom));
  }

  private forgetDrained(now: number): void {
    for (const [ip, b] of this.buckets)
      if (b.level - (now - b.atMs) / DRAIN_MS_PER_FAILURE < 1) this.buckets.delete(ip);
  }
}
