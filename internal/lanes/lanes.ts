import type { Clock } from "../clock/clock";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { LANES } from "../mail/policy";
import type { DeliveryPolicy, LaneSignals, MailStore, SingletonLeases } from "../hotstore/hotstore";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { LaneScheduler, LEAD_MS, type ReleaseRecord, realTime, TRANSACTIONAL_LEAD_MS } from "./scheduler";

// Expired leases and due retries are put back every RECOVER_EVERY_MS; a round that finds
// nothing doubles the wait before the next, up to RECOVER_IDLE_MAX_MS, so an idle daemon stays
// quiet (a retry or an expired lease waits at most that much more: their delays are seconds).
const RECOVER_EVERY_MS = 500;
const RECOVER_IDLE_MAX_MS = 3_000;

export interface LanesOptions {
  store: MailStore & SingletonLeases & LaneSignals;
  clock: Clock;
  ratePerSecond: number;
  owner: string;
  policy: DeliveryPolicy;
  onRelease(r: ReleaseRecord): void;
  /** Called when expired leases or due retries were put back. */
  onRecovered(): void;
  log: Logger;
}

/** Runs both lanes' schedulers, woken by the store's lane signals, and the loop that recovers expired leases and due retries. */
export function startLanes(o: LanesOptions): { stop(): Promise<void> } {
  const schedulers = LANES.map(
    (lane) =>
      new LaneScheduler({
        store: o.store,
        lane,
        ratePerSecond: o.ratePerSecond,
        owner: o.owner,
        time: realTime,
        leadMs: lane === Lane.TRANSACTIONAL ? TRANSACTIONAL_LEAD_MS : LEAD_MS,
        onRelease: o.onRelease,
        log: o.log,
      }),
  );
  const unwatch = o.store.watchLanes((signal) => {
    if (signal.kind === "waiting") schedulers[LANES.indexOf(signal.lane as (typeof LANES)[number])]?.wake();
  });
  for (const s of schedulers) s.start();
  const failing = new FailureEpisode(o.log, "recovery");
  let waitMs = RECOVER_EVERY_MS;
  let recovery: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const recover = async () => {
    try {
      const { expired, retried, failed } = await o.store.recover(o.clock.nowMs(), o.policy);
      const found = expired + retried + failed > 0;
      if (found) {
        o.log.info("recovered", { expired, retried, failed });
        o.onRecovered();
      }
      waitMs = found ? RECOVER_EVERY_MS : Math.min(RECOVER_IDLE_MAX_MS, waitMs * 2);
      failing.succeeded();
    } catch (err) {
      waitMs = RECOVER_EVERY_MS;
      failing.failed(err as Error);
    }
    if (!stopped) recovery = setTimeout(recover, waitMs);
  };
  recovery = setTimeout(recover, waitMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(recovery);
      unwatch();
      await Promise.all(schedulers.map((s) => s.stop()));
    },
  };
}
