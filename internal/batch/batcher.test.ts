import { expect, test } from "bun:test";
import { MicroBatcher } from "./batcher";

test("calls of one turn go out as one batch, answers come back in order", async () => {
  const batches: number[][] = [];
  const b = new MicroBatcher<number, number>(async (xs) => {
    batches.push(xs);
    return xs.map((x) => x * 10);
  }, 100);
  expect(await Promise.all([1, 2, 3].map((x) => b.submit(x)))).toEqual([10, 20, 30]);
  expect(batches).toEqual([[1, 2, 3]]);
});

test("while the in-flight slots are busy, calls wait and join the next batch; batches respect the cap", async () => {
  const batches: number[][] = [];
  const gates: (() => void)[] = [];
  const b = new MicroBatcher<number, number>(
    (xs) => {
      batches.push(xs);
      return new Promise((done) => gates.push(() => done(xs)));
    },
    3,
    1,
  );
  const first = b.submit(0);
  await Bun.sleep(1);
  const rest = [1, 2, 3, 4, 5].map((x) => b.submit(x));
  await Bun.sleep(1);
  expect(batches).toEqual([[0]]); // one slot, busy
  gates.shift()!();
  await first;
  await Bun.sleep(1);
  expect(batches).toEqual([[0], [1, 2, 3]]);
  gates.shift()!();
  await Bun.sleep(1);
  gates.shift()!();
  expect(await Promise.all(rest)).toEqual([1, 2, 3, 4, 5]);
  expect(batches).toEqual([[0], [1, 2, 3], [4, 5]]);
});

test("a failed batch rejects each of its calls, and the batcher goes on", async () => {
  let fail = true;
  const b = new MicroBatcher<number, number>(async (xs) => {
    if (fail) throw new Error("daemon down");
    return xs;
  }, 10);
  const failed = await Promise.allSettled([b.submit(1), b.submit(2)]);
  expect(failed.map((r) => r.status)).toEqual(["rejected", "rejected"]);
  fail = false;
  expect(await b.submit(3)).toBe(3);
});

test("a batch answered with the wrong number of results rejects", async () => {
  const b = new MicroBatcher<number, number>(async () => [1], 10);
  const r = await Promise.allSettled([b.submit(1), b.submit(2)]);
  expect(r.every((x) => x.status === "rejected")).toBe(true);
});
