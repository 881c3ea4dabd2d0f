// The hot store's connection to its backing service (StoreLifecycle), run against every adapter
// (embedded, Redis, Redis Cluster): the daemon's health check is its ping.
import { describe, expect, test } from "bun:test";
import { hotStoreServers, hotStores } from "../testkit/hotstores";

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store lifecycle: ${name}`, () => {
    test("ping answers while the store is open and rejects once it is closed", async () => {
      const store = await open();
      await store.lifecycle.ping();
      await store.lifecycle.close();
      await expect(store.lifecycle.ping()).rejects.toThrow();
    });
  });
}
