// The store adapters the conformance suites run against: both, always.
import { EmbeddedStore } from "./embedded";
import { connectRedis, RedisStore } from "./redis";
import type { Store } from "./store";

export function storeAdapters(redisUrl: () => string): [string, () => Promise<Store>][] {
  return [
    ["embedded", async () => new EmbeddedStore(null)],
    [
      "redis",
      async () => {
        const redis = await connectRedis(redisUrl());
        await redis.flushall(); // each test starts from an empty Redis, as the embedded one does
        return new RedisStore(redis);
      },
    ],
  ];
}
