import { afterEach, expect, test } from "bun:test";
import { JobTimeout, WorkerPool } from "./pool";

type In = { spinMs?: number; fail?: string; value: string };
const script = new URL("../testkit/pool_worker.ts", import.meta.url).href;
let pool: WorkerPool<In, string> | undefined;
const make = (size: number, timeoutMs: number) => (pool = new WorkerPool<In, string>({ script, size, timeoutMs }));
afterEach(async () => {
  await pool?.close();
});

test("jobs run on the threads and answer", async () => {
  const p = make(2, 5_000);
  expect(await Promise.all(["a", "b", "c"].map((value) => p.run("org", { value })))).toEqual(["a", "b", "c"]);
});

test("a job that throws rejects with its message; the thread keeps serving", async () => {
  const p = make(1, 5_000);
  expect(p.run("org", { value: "x", fail: "bad input" })).rejects.toThrow("bad input");
  expect(await p.run("org", { value: "y" })).toBe("y");
});

test("a job past the cap is cut off, its thread replaced, and the event loop never waits for it", async () => {
  const p = make(1, 300);
  // Timers keep firing on time while a thread spins: the longest gap between two ticks.
  let worstGapMs = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    worstGapMs = Math.max(worstGapMs, now - last);
    last = now;
  }, 5);
  const started = performance.now();
  const err = await p.run("org", { value: "x", spinMs: 60_000 }).catch((e: Error) => e);
  clearInterval(ticker);
  expect(err).toBeInstanceOf(JobTimeout);
  expect(performance.now() - started).toBeLessThan(5_000);
  expect(worstGapMs).toBeLessThan(200);
  expect(await p.run("org", { value: "after" })).toBe("after");
});

test("waiting jobs are served round-robin over their keys", async () => {
  const p = make(1, 5_000);
  const order: string[] = [];
  const jobs = [
    ...["a1", "a2", "a3"].map((value) => p.run("a", { value, spinMs: 20 })),
    p.run("b", { value: "b1", spinMs: 20 }),
  ].map((job) => job.then((v) => order.push(v)));
  await Promise.all(jobs);
  // a1 was already running; b1 comes before a's backlog.
  expect(order).toEqual(["a1", "b1", "a2", "a3"]);
});
