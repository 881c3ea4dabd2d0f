import { expect, test } from "bun:test";
import { mergeTally, startCollector } from "./collector";

test("tallies add counts and keep the outer time bounds", () => {
  const t = mergeTally({}, { "200": 3, firstStart: 10, lastEnd: 20 });
  mergeTally(t, { "200": 2, "429": 1, firstStart: 5, lastEnd: 15, firstEnd: 7 });
  expect(t).toEqual({ "200": 5, "429": 1, firstStart: 5, lastEnd: 20, firstEnd: 7 });
});

test("the collector sums what VUs post", async () => {
  const c = startCollector();
  try {
    for (const n of [1, 2, 3])
      await fetch(`${c.url}/tally/q`, { method: "POST", body: JSON.stringify({ "200": n, lastStart: n }) });
    expect(await (await fetch(`${c.url}/tally/q`)).json()).toEqual({ "200": 6, lastStart: 3 });
    expect(await (await fetch(`${c.url}/tally/none`)).json()).toEqual({});
  } finally {
    c.stop();
  }
});
