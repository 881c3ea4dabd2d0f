import { expect, test } from "bun:test";
import { AuthThrottle } from "./throttle";

test("failures from one address are slowed from the 3rd, refused at the 10th, and forgiven at one a minute", () => {
  let now = 0;
  const t = new AuthThrottle(10, () => now);
  const delays = Array.from({ length: 10 }, () => t.failed("192.0.2.1"));
  expect(delays).toEqual([0, 0, 250, 500, 1_000, 2_000, 4_000, 4_000, 4_000, 4_000]);
  expect(t.refusedForSeconds("192.0.2.1")).toBe(60);
  expect(t.refusedForSeconds("192.0.2.2")).toBe(0); // another address is not touched
  now += 59_000;
  expect(t.refusedForSeconds("192.0.2.1")).toBe(1);
  now += 1_000;
  expect(t.refusedForSeconds("192.0.2.1")).toBe(0); // one failure drained: one more guess
  expect(t.failed("192.0.2.1")).toBe(4_000);
  expect(t.refusedForSeconds("192.0.2.1")).toBe(60);
  now += 10 * 60_000;
  expect(t.refusedForSeconds("192.0.2.1")).toBe(0);
  expect(t.failed("192.0.2.1")).toBe(0);
});

test("an address has failures until all of them have drained", () => {
  let now = 0;
  const t = new AuthThrottle(10, () => now);
  expect(t.hasFailures("192.0.2.1")).toBe(false);
  t.failed("192.0.2.1");
  expect(t.hasFailures("192.0.2.1")).toBe(true);
  expect(t.hasFailures("192.0.2.2")).toBe(false);
  now += 60_000;
  expect(t.hasFailures("192.0.2.1")).toBe(false);
});
