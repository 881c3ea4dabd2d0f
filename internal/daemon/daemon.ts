import type { ConnectRouter } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import type { DeliveryPolicy, HotStore } from "../hotstore/hotstore";
import { type Lanes, startLanes } from "../lanes/lanes";
import type { Logger } from "../log/log";
import { laneName } from "../mail/policy";
import type { LimiterMetrics } from "../metrics/metrics";
import type { Records } from "../records/records";
import type { RetryPolicy } from "../records/webhooks";
import { newToken } from "../token/token";
import { audienceRoutes } from "./audience_service";
import { automationRoutes } from "./automation_service";
import { CampaignFanout } from "./campaign_fanout";
import { WorkflowRunner } from "./workflow_runner";
import { consoleRoutes } from "./console_service";
import { txtLookup } from "./dns";
import { acceptor, MailRuntime, mailRoutes } from "./mail_service";
import { Projection } from "./projection";
import { recordBoundRouter } from "./records_deadline";
import { Reconciler } from "./reconciler";
import { RecordsWriter } from "./recordswriter";
import { RefusalCounter } from "./refusals";
import type { RawUnary } from "./server";
import { limiterService } from "./service";
import { webhookRoutes } from "./webhook_service";

export interface DaemonOptions {
  hot: HotStore;
  records: Records;
  clock: Clock;
  laneRate: number;
  visibilityMs: number;
  /** How often the records are reconciled with the hot store. */
  reconcileEveryMs: number;
  policy: DeliveryPolicy;
  retentionMs: number;
  /** When failed webhook attempts are retried, and when an endpoint is disabled. */
  webhookPolicy: RetryPolicy;
  /** This daemon's name in the hot store's leases. */
  owner: string;
  /** Where domain verification looks up TXT records (host:port); undefined: the system's resolvers. */
  dnsServer?: string;
  /** Where links in mail (unsubscribe) point: PUBLIC_URL. */
  publicUrl: string;
  log: Logger;
  /** Counts admissions, releases and the records writer's failures when set. */
  metrics?: LimiterMetrics;
}

export interface Daemon {
  routes(router: ConnectRouter): void;
  /** The methods served outside Connect's router (serveRpc's `raw`): AdmitBatch in binary gRPC. */
  raw: Record<string, RawUnary>;
  /** Starts the lane schedulers and the records writer. */
  start(): void;
  /** Stops releasing and ends the lease streams (their leases stay with the workers). */
  stopReleasing(): Promise<void>;
  /** Stops the records writer, writing what is left to the records. */
  stop(): Promise<void>;
}

/** The limiter daemon's parts, wired: its RPCs (admission, mail, console, audience), the lanes and the records writer. */
export function limiterDaemon(o: DaemonOptions): Daemon {
  const projection = new Projection(o.hot, o.records.directory);
  const writer = new RecordsWriter({
    hot: o.hot,
    records: o.records,
    clock: o.clock,
    owner: o.owner,
    retentionMs: o.retentionMs,
    log: o.log,
    metrics: o.metrics,
  });
  const runtime = new MailRuntime(() => {
    writer.changed();
    reconciler.wake();
  });
  const refusals = new RefusalCounter(o.hot, o.records.stats, o.clock, o.log);
  const limiter = limiterService({
    hot: o.hot,
    records: o.records,
    projection,
    writer,
    refusals,
    clock: o.clock,
    newToken,
    metrics: o.metrics,
  });
  const mail = mailRoutes(
    {
      hot: o.hot,
      records: o.records,
      projection,
      clock: o.clock,
      laneRate: o.laneRate,
      visibilityMs: o.visibilityMs,
      policy: o.policy,
      refusals,
    },
    runtime,
  );
  const consoleService = consoleRoutes({
    hot: o.hot,
    records: o.records,
    projection,
    refusals,
    clock: o.clock,
    laneRate: o.laneRate,
    lookupTxt: txtLookup(o.dnsServer),
    newToken,
  });
  const webhooks = webhookRoutes({ records: o.records, clock: o.clock, policy: o.webhookPolicy });
  // Changes that give the leased loops work wake them (on this daemon; another one's loops come
  // round within their idle wait).
  const audience = audienceRoutes({ records: o.records, clock: o.clock, onChange: () => runner.wake() });
  const automation = automationRoutes({ records: o.records, clock: o.clock, onCampaignSent: () => fanout.wake() });
  const accept = acceptor({ hot: o.hot, projection, clock: o.clock }, runtime);
  const automationParts = {
    records: o.records,
    hot: o.hot,
    clock: o.clock,
    owner: o.owner,
    accept,
    publicUrl: o.publicUrl,
    log: o.log,
  };
  const fanout = new CampaignFanout(automationParts);
  const runner = new WorkflowRunner(automationParts);
  const reconciler = new Reconciler({
    hot: o.hot,
    records: o.records,
    clock: o.clock,
    owner: o.owner,
    log: o.log,
    everyMs: o.reconcileEveryMs,
    holdMs: o.visibilityMs,
    metrics: o.metrics,
  });
  // Releases by any daemon on the store wake this daemon's idle lease streams (from its
  // construction: a daemon's RPCs serve before its lanes start); any lane signal wakes the
  // records writer and the reconciliation, which may be this daemon's.
  const unwatch = o.hot.watchLanes((s) => {
    if (s.kind === "ready") runtime.work.notifyAll();
    writer.changed();
    reconciler.wake();
  });
  let lanes: Lanes | undefined;
  return {
    routes(router) {
      limiter.routes(router);
      mail(router);
      consoleService(router);
      const recordBound = recordBoundRouter(router, o.records, () => o.clock.nowMs());
      webhooks(recordBound);
      audience(recordBound);
      automation(recordBound);
    },
    raw: limiter.raw,
    start() {
      writer.start();
      refusals.start();
      fanout.start();
      runner.start();
      reconciler.start();
      lanes = startLanes({
        store: o.hot,
        clock: o.clock,
        ratePerSecond: o.laneRate,
        owner: o.owner,
        policy: o.policy,
        onRelease: (r) => {
          runtime.recordRelease(r);
          o.metrics?.released.inc({ lane: laneName(r.lane) });
        },
        onMissed: (lane, slots) => o.metrics?.slotsMissed.inc({ lane: laneName(lane) }, slots),
        onRecovered: () => {
          runtime.work.notifyAll();
          runtime.onChange();
        },
        log: o.log,
      });
      runtime.recovery = lanes;
    },
    async stopReleasing() {
      await Promise.all([fanout.stop(), runner.stop(), reconciler.stop()]);
      await lanes?.stop();
      unwatch();
      runtime.stopping.abort();
    },
    async stop() {
      await this.stopReleasing();
      await writer.stop();
      await refusals.stop();
    },
  };
}
