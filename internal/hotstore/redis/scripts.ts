import type { Cluster, Redis } from "ioredis";
import { script } from "./layout";

/**
 * The scripts and how many keys each takes. A fixed count puts the keys first, which is how
 * ioredis's cluster auto-pipelining finds a command's slot; only admit (one primary) varies.
 */
const SCRIPTS = {
  admit: undefined,
  admit_ip: 1,
  admit_org: 2,
  refund_ip: 1,
  enqueue: 9,
  release: 5,
  hold_lane: 3,
  lease: 4,
  ack: 3,
  keep: 1,
  recover: 4,
  hold: 1,
  project_org: 1,
  message: 1,
  collect: 1,
  settle: 1,
  presence: 1,
  putback: 1,
  listing: 1,
  drop: 1,
  cool: 1,
  usage_org: 1,
  usage_lanes: 2,
} as const;

type Args = (string | number)[];
type Commands = { [K in keyof typeof SCRIPTS]: (...args: Args) => Promise<never> };

/** One Redis primary, or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** A client with every script defined as a command of its own. */
export type ScriptedRedis = RedisClient & Commands;

/**
 * Defines every script on the client with the shared prelude in front: EVALSHA, reloaded on
 * NOSCRIPT by ioredis's defineCommand.
 */
export function withScripts(redis: RedisClient): ScriptedRedis {
  for (const [name, numberOfKeys] of Object.entries(SCRIPTS))
    redis.defineCommand(name, { lua: script(name), numberOfKeys });
  return redis as ScriptedRedis;
}
