import type { SingletonLeases } from "../hotstore";
import { keys } from "./layout";
import type { ScriptedRedis } from "./scripts";

/**
 * The singleton leases in Redis, shared by every daemon on it. Not through the confirmed writes:
 * a lease a failover loses is taken again by the next daemon to look, and two holders overlap
 * until the first one's next renewal finds it held by another (their work is atomic scripts on
 * the shared state, a lane's slots included, and idempotent writes of the records); whereas a
 * renewal that waited would fail while the replica is cut off, and every singleton (the lanes'
 * schedulers, the records writer, the reconciliation) would stop with it.
 */
export class RedisLeases implements SingletonLeases {
  constructor(private readonly redis: ScriptedRedis) {}

  async holdLease(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return ((await this.redis.hold(keys.lease(name), owner, ttlMs)) as number) === 1;
  }
}
