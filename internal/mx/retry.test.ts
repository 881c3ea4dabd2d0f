import { expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { nextRetry, type RetryDecision, retryPolicy } from "./retry";

const MIN = 60_000;
const HOUR = 60 * MIN;
const middle = () => 0.5; // no jitter: 2 * 0.5 - 1 = 0

/** Fails every attempt from the clock's time until the schedule gives up; the attempts' times. */
function runToEnd(maxHours: number, random = middle, attemptMs = 0) {
  const clock = new ManualClock();
  const first = clock.nowMs();
  const times = [first];
  const delayedAt: number[] = [];
  let delayedSent = false;
  for (;;) {
    clock.advance(attemptMs);
    const d: RetryDecision = nextRetry(
      { firstAttemptMs: first, attempts: times.length, nowMs: clock.nowMs(), delayedSent },
      retryPolicy(maxHours),
      random,
    );
    if (d.kind === "fail") return { times: times.map((t) => t - first), delayedAt };
    if (d.notifyDelayed) {
      delayedAt.push(clock.nowMs() - first);
      delayedSent = true;
    }
    expect(d.atMs).toBeGreaterThan(clock.nowMs());
    clock.advance(d.atMs - clock.nowMs());
    times.push(clock.nowMs());
  }
}

test("the schedule: 1, 5, 15, 30, 60 minutes, then every 2 hours, the last try at 48 hours", () => {
  const { times } = runToEnd(48);
  expect(times.slice(0, 7)).toEqual([0, 1 * MIN, 6 * MIN, 21 * MIN, 51 * MIN, 111 * MIN, 231 * MIN]);
  expect(times.at(-1)).toBe(48 * HOUR);
  expect(times.length).toBe(30); // 47 h 51 min, then 48 h
  for (let i = 6; i < times.length - 1; i++) expect(times[i]! - times[i - 1]!).toBe(2 * HOUR);
});

test("MAX_RETRY_HOURS bounds the schedule", () => {
  const { times } = runToEnd(1);
  expect(times).toEqual([0, 1 * MIN, 6 * MIN, 21 * MIN, 51 * MIN, 60 * MIN]);
});

test("the message is reported delayed once, at the first failure 4 hours or more after the first attempt", () => {
  const { delayedAt } = runToEnd(48);
  expect(delayedAt).toEqual([(231 + 120) * MIN]);
});

test("jitter spreads a scheduled wait within 10% either side", () => {
  const policy = retryPolicy();
  const at = (r: number) =>
    nextRetry({ firstAttemptMs: 0, attempts: 3, nowMs: 0, delayedSent: false }, policy, () => r) as {
      atMs: number;
    };
  expect(at(0).atMs).toBe(13.5 * MIN);
  expect(at(0.999999).atMs).toBeCloseTo(16.5 * MIN, -2);
  const seen = new Set(Array.from({ length: 50 }, () => at(Math.random()).atMs));
  expect(seen.size).toBeGreaterThan(40);
});

test("a wait the reply asks for replaces the schedule's, spread upwards only, never under a minute", () => {
  const policy = retryPolicy();
  const at = (retryAfterMs: number, r: number) =>
    (
      nextRetry({ firstAttemptMs: 0, attempts: 1, nowMs: 0, retryAfterMs, delayedSent: false }, policy, () => r) as {
        atMs: number;
      }
    ).atMs;
  expect(at(5 * MIN, 0)).toBe(5 * MIN);
  expect(at(5 * MIN, 0.5)).toBe(5.25 * MIN);
  expect(at(10_000, 0)).toBe(MIN);
  expect(at(3 * HOUR, 0)).toBe(3 * HOUR);
});

test("a hint beyond the retry time gives one last try at its end", () => {
  const policy = retryPolicy(1);
  const d = nextRetry(
    { firstAttemptMs: 0, attempts: 2, nowMs: 50 * MIN, retryAfterMs: HOUR, delayedSent: false },
    policy,
  );
  expect(d).toEqual({ kind: "retry", atMs: HOUR, notifyDelayed: false });
  expect(nextRetry({ firstAttemptMs: 0, attempts: 3, nowMs: HOUR, delayedSent: false }, policy).kind).toBe("fail");
});

test("slow attempts still end at the retry time", () => {
  const { times } = runToEnd(48, Math.random, 90_000);
  expect(times.at(-1)).toBe(48 * HOUR);
});

test("a divisor shortens every duration alike (tests)", () => {
  expect(retryPolicy(48, 1_000)).toEqual({
    maxRetryMs: 172_800,
    delayedAfterMs: 14_400,
    stepsMs: [60, 300, 900, 1_800, 3_600],
    thenEveryMs: 7_200,
    jitter: 0.1,
    minDelayMs: 60,
  });
});
