import type { LaneSignal, LaneSignals } from "../hotstore";

/** The lane signals of the embedded store: one daemon owns it, so its signals are its own. */
export class EmbeddedLaneSignals implements LaneSignals {
  private readonly watchers = new Set<(signal: LaneSignal) => void>();

  watchLanes(on: (signal: LaneSignal) => void): () => void {
    this.watchers.add(on);
    return () => this.watchers.delete(on);
  }

  signal(s: LaneSignal): void {
    for (const w of this.watchers) w(s);
  }
}
