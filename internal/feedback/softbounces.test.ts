import { expect, test } from "bun:test";
import { type DeliveryOutcome, SOFT_BOUNCE_RULE, softBounceVerdict } from "./softbounces";

const H = 3_600_000;
const NOW = Date.UTC(2026, 5, 1);
const at = (hoursAgo: number, outcome: DeliveryOutcome["outcome"]): DeliveryOutcome => ({
  atMs: NOW - hoursAgo * H,
  outcome,
});

test("three soft bounces 72 hours apart with nothing delivered between suppress", () => {
  const v = softBounceVerdict([at(80, "soft"), at(40, "soft"), at(8, "soft")], NOW);
  expect(v).toEqual({ suppress: true, softBounces: 3, spanHours: 72 });
});

test("a span one hour short of 72 does not", () => {
  expect(softBounceVerdict([at(79, "soft"), at(40, "soft"), at(8, "soft")], NOW).suppress).toBe(false);
});

test("a burst does not: ten soft bounces within an hour", () => {
  const burst = Array.from({ length: 10 }, (_, i) => at(1 - i / 10, "soft"));
  expect(softBounceVerdict(burst, NOW)).toMatchObject({ suppress: false, softBounces: 10 });
});

test("two are not enough, however far apart", () => {
  expect(softBounceVerdict([at(300, "soft"), at(1, "soft")], NOW).suppress).toBe(false);
});

test("a delivery between them starts the count again", () => {
  const h = [at(200, "soft"), at(150, "soft"), at(100, "delivered"), at(90, "soft"), at(10, "soft")];
  expect(softBounceVerdict(h, NOW)).toMatchObject({ suppress: false, softBounces: 2 });
  expect(softBounceVerdict([...h, at(5, "soft")], NOW).suppress).toBe(true);
});

test("policy, transient and hard outcomes neither count nor reset the count", () => {
  const h = [at(100, "soft"), at(90, "policy"), at(60, "transient"), at(50, "soft"), at(40, "hard"), at(20, "soft")];
  expect(softBounceVerdict(h, NOW)).toEqual({ suppress: true, softBounces: 3, spanHours: 80 });
});

test("soft bounces older than 30 days are forgotten; the history's order does not matter", () => {
  const old = [at(24 * 31, "soft"), at(24 * 30.5, "soft")];
  expect(softBounceVerdict([at(10, "soft"), ...old], NOW)).toMatchObject({ suppress: false, softBounces: 1 });
  const shuffled = [at(8, "soft"), at(80, "soft"), at(40, "soft")];
  expect(softBounceVerdict(shuffled, NOW).suppress).toBe(true);
});

test("events after now (a clock that moved back) are not counted; the rule can be set", () => {
  expect(softBounceVerdict([at(-1, "soft"), at(-100, "soft"), at(0, "soft")], NOW).softBounces).toBe(1);
  const strict = { ...SOFT_BOUNCE_RULE, count: 2, spanMs: 24 * H };
  expect(softBounceVerdict([at(30, "soft"), at(1, "soft")], NOW, strict).suppress).toBe(true);
});
