import { Cluster } from "ioredis";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import { LANES } from "../../mail/policy";
import type { LaneSignal, LaneSignals } from "../hotstore";
import { keys } from "./layout";
import type { RedisClient } from "./scripts";

/**
 * The lane signals of every daemon on one Redis: the scripts PUBLISH them (a lane whose depth
 * became 1, a ready list that was empty), and a connection of its own, opened by the first
 * watcher (a subscribed connection runs no other command), hears them. Pub/sub is at most once:
 * after every (re)connection, once subscribed, every signal is taken as given, so that each
 * watcher looks once at what it may have missed.
 */
export class RedisLaneSignals implements LaneSignals {
  private subscriber: RedisClient | undefined;
  private readonly watchers = new Set<(signal: LaneSignal) => void>();

  constructor(private readonly client: RedisClient) {}

  watchLanes(on: (signal: LaneSignal) => void): () => void {
    this.watchers.add(on);
    this.subscriber ??= this.subscribe();
    return () => this.watchers.delete(on);
  }

  close(): void {
    this.subscriber?.disconnect();
  }

  private subscribe(): RedisClient {
    const sub: RedisClient = this.client instanceof Cluster ? this.client.duplicate() : this.client.duplicate();
    sub.on("error", () => {}); // it reconnects by itself
    sub.on("message", (_channel: string, message: string) =>
      this.emit(message === "r" ? { kind: "ready" } : { kind: "waiting", lane: Number(message.slice(1)) as Lane }),
    );
    sub.on("ready", () => {
      sub
        .subscribe(keys.signals())
        .then(() => {
          for (const lane of LANES) this.emit({ kind: "waiting", lane });
          this.emit({ kind: "ready" });
        })
        .catch(() => {});
    });
    sub.connect().catch(() => {});
    return sub;
  }

  private emit(signal: LaneSignal): void {
    for (const w of this.watchers) w(signal);
  }
}
