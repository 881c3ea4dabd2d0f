// A leased loop tells its round when it takes the lease afresh (after another daemon held it, or
// after a failure), not when it renews it: the reconciliation forgets what it found missing then.
import { expect, test } from "bun:test";
import { captureLogger } from "../testkit/logcapture";
import { LeasedLoop } from "./leasedloop";

class Counting extends LeasedLoop {
  taken = 0;
  rounds = 0;
  fail = false;
  protected async round(): Promise<boolean> {
    this.rounds++;
    if (this.fail) throw new Error("the round failed");
    return true;
  }
  protected override leaseTaken(): void {
    this.taken++;
  }
}

test("leaseTaken: at the first hold, after the lease was seen held by another, after a failed round; not on renewals", async () => {
  let mine = true;
  const loop = new Counting(
    { leases: { holdLease: async () => mine }, owner: "a", log: captureLogger().log },
    { lease: "test", tickMs: 10, what: "test loop" },
  );
  await loop.tick();
  expect([loop.rounds, loop.taken]).toEqual([1, 1]);
  for (let i = 0; i < 3; i++) await loop.tick(); // within the renewal period: no call to holdLease at all
  expect([loop.rounds, loop.taken]).toEqual([4, 1]);
  loop.fail = true;
  await loop.tick(); // a failed round lets the lease go
  loop.fail = false;
  await loop.tick();
  expect([loop.rounds, loop.taken]).toEqual([6, 2]);
  mine = false;
  await Bun.sleep(2_600); // past the renewal period: the next tick asks, and another daemon holds it
  await loop.tick();
  expect([loop.rounds, loop.taken]).toEqual([6, 2]);
  mine = true;
  await loop.tick();
  expect([loop.rounds, loop.taken]).toEqual([7, 3]);
});
