// The singleton leases of the hot store (SingletonLeases), run against every adapter
// (embedded, Redis, Redis Cluster).
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { hotStoreServers, hotStores } from "../testkit/hotstores";
import type { HotStore } from "./hotstore";

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store singleton leases: ${name}`, () => {
    let store: HotStore;

    beforeEach(async () => {
      if (store) await store.lifecycle.close();
      store = await open();
    });
    afterAll(async () => {
      await store?.lifecycle.close();
    });

    test("leases: one holder at a time, renewed by its owner, taken over when it lapses", async () => {
      expect(await store.leases.holdLease("history", "a", 1_000)).toBe(true);
      expect(await store.leases.holdLease("history", "a", 1_000)).toBe(true);
      const other = await store.leases.holdLease("history", "b", 1_000);
      // The embedded store belongs to one daemon, which always holds its leases.
      expect(other).toBe(name === "embedded");
    });
  });
}
