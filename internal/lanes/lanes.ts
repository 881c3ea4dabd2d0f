import { type Clock, delayUntil } from "../clock/clock";
import type { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { LANES } from "../mail/policy";
import type { DeliveryPolicy, LaneSignals, MailStore, SingletonLeases } from "../hotstore/hotstore";
import { LaneScheduler, type ReleaseRecord, realTime } from "./scheduler";

/** The recovery's shortest gap between two rounds, and its longest while nothing is due. */
const RECOVER_EVERY_MS = 250;
const RECOVER_IDLE_MS = 10_000;

export interface LanesOptions {
  mail: Pick<MailStore, "release" | "recover">;
  leases: SingletonLeases;
  signals: LaneSignals;
  clock: Clock;
  ratePerSecond: number;
  owner: string;
  policy: DeliveryPolicy;
  onRelease(r: ReleaseRecord): void;
  /** A lane lost slots: its scheduler came back after the next slot of its backlog (SchedulerOptions.onMissed). */
  onMissed(lane: Lane, slots: number): void;
  /** Called when expired leases or due retries were put back. */
  onRecovered(): void;
  log: Logger;
}

export interface Lanes {
  /** Tells the recovery that a lease runs out or a retry comes due at ms (wall): it looks then at the latest. */
  dueBy(ms: number): void;
  stop(): Promise<void>;
}

/**
 * Runs both lanes' schedulers and the loop that recovers expired leases and due retries. The
 * recovery looks when the earliest lease or retry the store holds comes due (told sooner by this
 * daemon's leases and deferred acks), at most every 250 ms and at least every 10 s (another
 * daemon's leases, a daemon that died).
 */
export function startLanes(o: LanesOptions): Lanes {
  const schedulers = LANES.map(
    (lane) =>
      new LaneScheduler({
        mail: o.mail,
        leases: o.leases,
        signals: o.signals,
        lane,
        ratePerSecond: o.ratePerSecond,
        owner: o.owner,
        time: { nowMs: () => o.clock.nowMs(), sleep: realTime.sleep },
        onRelease: o.onRelease,
        onMissed: o.onMissed,
        log: o.log,
      }),
  );
  for (const s of schedulers) s.start();
  const failing = new FailureEpisode(o.log, "recovery");
  let stopped = false;
  /** When the next round runs (wall ms), the earliest it may, and what was told during a round. */
  let nextAt = 0;
  let earliestAt = 0;
  let toldDue = Number.POSITIVE_INFINITY;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wake: (() => void) | undefined;
  const arm = () => {
    clearTimeout(timer);
    if (wake) timer = setTimeout(() => wake?.(), delayUntil(nextAt, o.clock.nowMs()));
  };

  const round = async () => {
    toldDue = Number.POSITIVE_INFINITY;
    const startedAt = o.clock.nowMs();
    earliestAt = startedAt + RECOVER_EVERY_MS;
    try {
      const { expired, retried, failed, nextDueMs } = await o.mail.recover(startedAt, o.policy);
      if (expired + retried + failed > 0) {
        o.log.info("recovered", { expired, retried, failed });
        o.onRecovered();
      }
      failing.succeeded();
      const due = Math.min(nextDueMs ?? Number.POSITIVE_INFINITY, toldDue);
      nextAt = Math.min(Math.max(due, earliestAt), o.clock.nowMs() + RECOVER_IDLE_MS);
    } catch (err) {
      failing.failed(err as Error);
      nextAt = earliestAt;
    }
  };
  const done = (async () => {
    while (!stopped) {
      await round();
      if (stopped) break;
      await new Promise<void>((resolve) => {
        wake = () => {
          wake = undefined;
          clearTimeout(timer);
          resolve();
        };
        arm();
      });
    }
  })();

  return {
    dueBy(ms) {
      toldDue = Math.min(toldDue, ms);
      if (ms < nextAt) {
        nextAt = Math.max(ms, earliestAt);
        arm();
      }
    },
    async stop() {
      stopped = true;
      wake?.();
      await done;
      await Promise.all(schedulers.map((s) => s.stop()));
    },
  };
}
