// The hot store adapters the conformance suites run against: all of them, always.
import { afterAll, beforeAll } from "bun:test";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import type { HotStore } from "../hotstore/hotstore";
import { connectRedis, connectRedisCluster, RedisHot } from "../hotstore/redis/redis";
import { type RedisClusterServer, type RedisServer, startRedis, startRedisCluster } from "./testkit";

export interface HotStoreServers {
  /** A redis-server of the test's own. */
  redisUrl(): string;
  /** The seed nodes of a Redis Cluster of the test's own. */
  clusterNodes(): string[];
}

export function hotStores(servers: HotStoreServers): [string, () => Promise<HotStore>][] {
  return [
    ["embedded", async () => new EmbeddedHot(null)],
    [
      "redis",
      async () => {
        const redis = await connectRedis(servers.redisUrl());
        await redis.flushall(); // each test starts from an empty Redis, as the embedded one does
        return new RedisHot(redis);
      },
    ],
    [
      "redis cluster",
      async () => {
        const cluster = await connectRedisCluster(servers.clusterNodes());
        await Promise.all(cluster.nodes("master").map((node) => node.flushall()));
        return new RedisHot(cluster);
      },
    ],
  ];
}

/** A redis-server and a Redis Cluster of the test file's own: started before its tests, stopped after them. */
export function hotStoreServers(): HotStoreServers {
  let redis: RedisServer | undefined;
  let cluster: RedisClusterServer | undefined;
  beforeAll(async () => {
    [redis, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  });
  afterAll(async () => {
    await Promise.all([redis?.stop(), cluster?.stop()]);
  });
  return { redisUrl: () => redis!.url, clusterNodes: () => cluster!.nodes };
}
