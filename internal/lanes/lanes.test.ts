// What the lanes log while their store is down: a state change once, then a summary, not a
// line per slot (once: 80 lines per second during a Redis outage).
import { expect, test } from "bun:test";
import { systemClock } from "../clock/clock";
import type { LaneSignals, MailStore, SingletonLeases } from "../hotstore/hotstore";
import { captureLogger } from "../testkit/logcapture";
import { startLanes } from "./lanes";

test("a store outage is logged once per loop when it starts and once when it ends", async () => {
  let down = true;
  const fail = async () => {
    if (down) throw new Error("Connection is closed.");
  };
  const mail: Pick<MailStore, "release" | "recover"> = {
    release: async () => {
      await fail();
      return { released: [], nextSlotMs: null };
    },
    recover: async () => {
      await fail();
      return { expired: 0, retried: 0, failed: 0, nextDueMs: null };
    },
  };
  const leases: SingletonLeases = {
    holdLease: async () => {
      await fail();
      return true;
    },
  };
  const signals: LaneSignals = { watchLanes: () => () => {} };
  const { log, lines } = captureLogger();
  const policy = { maxAttempts: 5, retryBaseMs: 1_000, bounceCooldownMs: 1_000 };
  const lanes = startLanes({
    mail,
    leases,
    signals,
    clock: systemClock,
    ratePerSecond: 40,
    owner: "t",
    policy,
    onRelease: () => {},
    onMissed: () => {},
    onRecovered: () => {},
    log,
  });
  await Bun.sleep(1_200); // 48 slots per lane and 4 recovery rounds, all failing
  const during = lines.length;
  down = false;
  await Bun.sleep(1_000);
  await lanes.stop();
  // Two lane schedulers and the recovery loop: one line each when the outage starts...
  expect(during).toBe(3);
  expect(lines.slice(0, 3).every((l) => l.level === "warn" && l.fields.error === "Connection is closed.")).toBe(true);
  // ...and one each when it ends, with how long it lasted.
  const recovered = lines.slice(3);
  expect(recovered).toHaveLength(3);
  for (const l of recovered) {
    expect(l.level).toBe("info");
    expect(l.fields.failures).toBeGreaterThan(0);
    expect(l.fields.downMs).toBeGreaterThan(900);
  }
});
