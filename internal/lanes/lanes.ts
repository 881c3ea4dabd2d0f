import type { Clock } from "../clock/clock";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { LANES } from "../mail/policy";
import type { DeliveryPolicy, LaneSignals, MailStore, SingletonLeases } from "../hotstore/hotstore";
import { LaneScheduler, type ReleaseRecord, realTime } from "./scheduler";

// Expired leases and due retries are put back this often: a retry or an expired lease waits at
// most this much more (their delays are seconds at least); it keeps an idle daemon quiet.
const RECOVER_EVERY_MS = 1_000;

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
        onRelease: o.onRelease,
        log: o.log,
      }),
  );
  const unwatch = o.store.watchLanes((signal) => {
    if (signal.kind === "waiting") schedulers[LANES.indexOf(signal.lane as (typeof LANES)[number])]?.wake();
  });
  for (const s of schedulers) s.start();
  let recovering = false;
  const failing = new FailureEpisode(o.log, "recovery");
  const recovery = setInterval(async () => {
    if (recovering) return;
    recovering = true;
    try {
      const { expired, retried, failed } = await o.store.recover(o.clock.nowMs(), o.policy);
      if (expired + retried + failed > 0) {
        o.log.info("recovered", { expired, retried, failed });
        o.onRecovered();
      }
      failing.succeeded();
    } catch (err) {
      failing.failed(err as Error);
    } finally {
      recovering = false;
    }
  }, RECOVER_EVERY_MS);
  return {
    async stop() {
      clearInterval(recovery);
      unwatch();
      await Promise.all(schedulers.map((s) => s.stop()));
    },
  };
}
