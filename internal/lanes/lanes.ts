import type { Clock } from "../clock/clock";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { LANES } from "../mail/policy";
import type { DeliveryPolicy, MailStore, SingletonLeases } from "../hotstore/hotstore";
import { LaneScheduler, type ReleaseRecord } from "./scheduler";

const RECOVER_EVERY_MS = 250;

export interface LanesOptions {
  store: MailStore & SingletonLeases;
  clock: Clock;
  ratePerSecond: number;
  owner: string;
  policy: DeliveryPolicy;
  onRelease(r: ReleaseRecord): void;
  /** Called when expired leases or due retries were put back. */
  onRecovered(): void;
  log: Logger;
}

/** Runs both lanes' schedulers and the loop that recovers expired leases and due retries. */
export function startLanes(o: LanesOptions): { stop(): Promise<void> } {
  const schedulers = LANES.map(
    (lane) =>
      new LaneScheduler({
        store: o.store,
        lane,
        ratePerSecond: o.ratePerSecond,
        owner: o.owner,
        clock: o.clock,
        onRelease: o.onRelease,
        log: o.log,
      }),
  );
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
      await Promise.all(schedulers.map((s) => s.stop()));
    },
  };
}
