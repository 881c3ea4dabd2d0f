import { expect, test } from "bun:test";
import { delayUntil, MAX_TIMER_MS, timerDelay } from "./clock";

test("timerDelay: a delay a timer takes without a warning, from 0 to 2^31 - 1 ms", () => {
  expect(timerDelay(-0.0013)).toBe(0);
  expect(timerDelay(-5_000)).toBe(0);
  expect(timerDelay(Number.NaN)).toBe(0);
  expect(timerDelay(0)).toBe(0);
  expect(timerDelay(0.5)).toBe(0.5);
  expect(timerDelay(1_500)).toBe(1_500);
  expect(timerDelay(Number.POSITIVE_INFINITY)).toBe(MAX_TIMER_MS);
  expect(timerDelay(3e9)).toBe(MAX_TIMER_MS);
});

test("delayUntil: a moment read as past by a later clock reading is due now, not a negative delay", () => {
  const dueAt = performance.now();
  expect(delayUntil(dueAt, dueAt + 0.0013)).toBe(0);
  expect(delayUntil(1_000, 400)).toBe(600);
});

/** What a Bun process prints on stderr when it sets one timer of the given delay (an expression over delayUntil). */
function stderrOfTimer(delay: string): string {
  const script = `import { delayUntil } from ${JSON.stringify(`${import.meta.dir}/clock`)};
const at = performance.now();
clearTimeout(setTimeout(() => {}, ${delay}));`;
  return Bun.spawnSync([process.execPath, "-e", script], { stderr: "pipe" }).stderr.toString();
}

test("a timer whose delay is computed through delayUntil prints no warning; one computed by hand does", () => {
  expect(stderrOfTimer("at - (performance.now() + 0.0013)")).toContain("TimeoutNegativeWarning");
  expect(stderrOfTimer("delayUntil(at, performance.now() + 0.0013)")).toBe("");
  expect(stderrOfTimer("delayUntil(Number.POSITIVE_INFINITY, at)")).toBe("");
});
