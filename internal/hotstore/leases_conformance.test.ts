// The singleton leases of the hot store (SingletonLeases), run against every adapter
// (embedded, Redis, Redis Cluster).
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { hotStoreServers, hotStores } from "../testkit/hotstores";
import type { SingletonLeases, StoreLifecycle } from "./hotstore";

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store singleton leases: ${name}`, () => {
    let store: SingletonLeases & StoreLifecycle;

    beforeEach(async () => {
      if (store) await store.close();
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
    });

    test("leases: one holder at a time, renewed by its owner, taken over when it lapses", async () => {
      expect(await store.holdLease("history", "a", 1_000)).toBe(true);
      expect(await store.holdLease("history", "a", 1_000)).toBe(true);
      const other = await store.holdLease("history", "b", 1_000);
      // The embedded store belongs to one daemon, which always holds its leases.
      expect(other).toBe(name === "embedded");
    });
  });
}
