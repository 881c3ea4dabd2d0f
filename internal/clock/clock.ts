// Clock is where every algorithm takes "now" from: production passes systemClock,
// tests pass a ManualClock they move, so a 24-hour window is tested in milliseconds.
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

export class ManualClock implements Clock {
  constructor(private ms: number = Date.UTC(2026, 0, 1)) {}
  nowMs(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
