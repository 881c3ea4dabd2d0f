// The import graph is the runtime graph : the API process loads the daemon's
// client and the generated contracts, never daemon code.
import { expect, test } from "bun:test";
import { runtimeImports } from "../testkit/imports";

test("the API process loads no module of the daemon, its stores, its lanes or the tests", () => {
  const loaded = runtimeImports("cmd/api/index.ts");
  expect(loaded).toContain("internal/limiterclient/client.ts");
  expect(loaded.filter((m) => /^internal\/(limiter|hotstore|records|store|lanes|testkit)\//.test(m))).toEqual([]);
});
