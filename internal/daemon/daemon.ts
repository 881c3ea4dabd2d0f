import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import type { DomainsConfig } from "../config/config";
import type { MasterKey } from "../dkim/seal";
import type { DiskSpace } from "../diskspace/diskspace";
import { dnsResolver } from "../dnsquery/resolver";
import { Health } from "../gen/grpc/health/v1/health_pb";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import { DirectoryService, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryService, LaneService, MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { DestinationService } from "../gen/mailcore/limiter/v1/destinations_pb";
import { DomainService } from "../gen/mailcore/limiter/v1/domains_pb";
import { FeedbackService, TrackingService } from "../gen/mailcore/limiter/v1/feedback_pb";
import { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { WebhookDeliveryService, WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { DeliveryPolicy, HotStore, QueueCap } from "../hotstore/hotstore";
import { type Lanes, startLanes } from "../lanes/lanes";
import type { Logger } from "../log/log";
import { laneName } from "../mail/policy";
import type { LimiterMetrics } from "../metrics/metrics";
import type { Records } from "../records/records";
import type { RetryPolicy } from "../records/webhook_deliveries";
import { type RetryPolicy as RetryInHours, retryPolicy } from "../mx/retry";
import { newToken } from "../token/token";
import { type Accept, accept } from "./accept";
import {
  type AdmissionDeps,
  admissionHandlers,
  admissionRawHandlers,
  TagCache,
  VerdictCounts,
} from "./admission_service";
import { audienceHandlers } from "./audience_service";
import { automationHandlers } from "./automation_service";
import { CampaignFanout } from "./campaign_fanout";
import { consoleHandlers } from "./console_service";
import { deliveryHandlers } from "./delivery_service";
import { directoryHandlers } from "./directory_service";
import { DomainRecheck } from "./domain_recheck";
import { type DomainDeps, domainHandlers } from "./domain_service";
import { healthHandlers } from "./health_service";
import { laneHandlers } from "./lane_service";
import { MailRuntime } from "./mail_runtime";
import { mailHandlers } from "./mail_service";
import { Projection } from "./projection";
import { recordBoundRouter } from "./records_deadline";
import { sendBatchRawHandlers } from "./send_batch_service";
import { Reconciler } from "./reconciler";
import { RecordsWriter } from "./recordswriter";
import { RefusalCounter } from "./refusals";
import { Signing } from "./signing";
import { tenantGate } from "./tenant";
import { Tickets } from "./tickets";
import type { RawUnary } from "./server";
import { webhookDeliveryHandlers } from "./webhook_delivery_service";
import { DestinationReports, destinationHandlers } from "./destination_service";
import { feedbackHandlers } from "./feedback_service";
import { SendingState } from "./sending_state";
import { suppressionHandlers } from "./suppression_service";
import { trackingHandlers } from "./tracking_service";
import { webhookHandlers } from "./webhook_service";
import { WorkflowRunner } from "./workflow_runner";

export interface DaemonOptions {
  hot: HotStore;
  records: Records;
  clock: Clock;
  laneRate: number;
  visibilityMs: number;
  /** How often the records are reconciled with the hot store. */
  reconcileEveryMs: number;
  /** The short retry schedule (the relay, the file sink), and the bounce cooldown. */
  policy: DeliveryPolicy;
  /** The retry schedule in hours of MX delivery; the default's (48 hours) when not given. */
  retryInHours?: RetryInHours;
  retentionMs: number;
  /** When failed webhook attempts are retried, and when an endpoint is disabled. */
  webhookPolicy: RetryPolicy;
  /** This daemon's name in the hot store's leases. */
  owner: string;
  /** Where the domains' checks send their DNS queries (DNS_SERVER); undefined: the system's resolvers. */
  dnsServer?: string;
  /** Where links in mail (unsubscribe) point: PUBLIC_URL. */
  publicUrl: string;
  /** Every per-address limit counts an IPv6 client by its network of this many bits (IPV6_PREFIX_BITS). */
  ipv6PrefixBits: number;
  /** A console session unused this long has ended (CONSOLE_IDLE_TIMEOUT_MINUTES). */
  consoleIdleMs: number;
  /** The most one organization may have queued (MAX_QUEUED_PER_ORG, MAX_QUEUED_BYTES_PER_ORG). */
  queueCap: QueueCap;
  log: Logger;
  /** Counts admissions, releases and the records writer's failures when set. */
  metrics?: LimiterMetrics;
  /** The key of the admission tickets' MAC: masterKey.derive("plane-ticket"), the same on every daemon. */
  ticketKey: Buffer;
  /** The master key: seals the DKIM keys; the return paths' HMAC key and the tracking URLs' signing key derive from it. */
  master: MasterKey;
  /** How the sending domains' keys and records are made and checked. */
  domains: DomainsConfig;
  /** Told of a call refused because the store's disk is full (the raw methods'; the interceptors tell it of the rest). */
  disk?: Pick<DiskSpace, "noted">;
}

export interface Daemon {
  routes(router: ConnectRouter): void;
  /** The methods served outside Connect's router (serveRpc's `raw`): AdmitBatch and SendBatch in binary gRPC. */
  raw: Record<string, RawUnary>;
  /**
   * What serveRpc must put before every other interceptor: tenantGate, which gives each
   * organization-scoped call its ticket's organization (without it, those calls fail).
   */
  interceptors: Interceptor[];
  /** Starts the lane schedulers and the records writer. */
  start(): void;
  /** Stops releasing and ends the lease streams (their leases stay with the workers). */
  stopReleasing(): Promise<void>;
  /** Stops the records writer, writing what is left to the records. */
  stop(): Promise<void>;
}

/** What the daemon's services share: its options and the parts that keep state. */
export interface DaemonParts {
  o: DaemonOptions;
  /** The workers' reports of MX delivery's destinations. */
  destinations: DestinationReports;
  projection: Projection;
  runtime: MailRuntime;
  refusals: RefusalCounter;
  accept: Accept;
  /** The admission service's: the raw AdmitBatch is served with the same. */
  admissionDeps: AdmissionDeps;
  /** Wake the leased loops that a change gives work: the workflow runs, the campaigns' fan-out. */
  runner: Pick<WorkflowRunner, "wake">;
  fanout: Pick<CampaignFanout, "wake">;
  tickets: Tickets;
  signing: Signing;
  /** The domain service's: the recheck loop checks with the same. */
  domainDeps: DomainDeps;
  /** The hot store's copy of the suppression lists and bulk pauses, written through on every change. */
  sendingState: SendingState;
}

/** The limiter daemon's parts, wired: its RPCs (daemonRoutes), the lanes, the records writer and the leased loops. */
export function limiterDaemon(o: DaemonOptions): Daemon {
  const { records, clock, log, metrics } = o;
  const { admission, mail, usage, outbox, reconcile, leases, signals } = o.hot;
  const projection = new Projection(admission, records.directory);
  // A change of an organization's tags or their counts gives it a new audience stamp, which the
  // admissions' tag caches are kept by.
  records.audience.tagsChanged = (orgId) => admission.touchAudience(orgId);
  const writer = new RecordsWriter({
    outbox,
    leases,
    records,
    clock,
    owner: o.owner,
    retentionMs: o.retentionMs,
    log,
    metrics,
  });
  const reconciler = new Reconciler({
    reconcile,
    leases,
    records,
    clock,
    owner: o.owner,
    log,
    everyMs: o.reconcileEveryMs,
    holdMs: o.visibilityMs,
    syncHolds: () => sendingState.syncHolds(),
    metrics,
  });
  const runtime = new MailRuntime(() => {
    writer.changed();
    reconciler.wake();
  });
  const refusals = new RefusalCounter(usage, records.stats, clock, log);
  const sendingState = new SendingState(mail, records, clock, log);
  const accepting: Accept = (send) =>
    accept(
      {
        mail,
        projection,
        clock,
        queueCap: o.queueCap,
        onAccepted: () => runtime.onChange(),
        sending: sendingState,
      },
      send,
    );
  const sending = {
    records,
    mail,
    leases,
    clock,
    owner: o.owner,
    accept: accepting,
    publicUrl: o.publicUrl,
    log,
  };
  const fanout = new CampaignFanout(sending);
  const runner = new WorkflowRunner(sending);
  const tickets = new Tickets(o.ticketKey, () => clock.nowMs());
  const signing = new Signing({
    records,
    master: o.master,
    clock,
    log,
    returnPathSubdomain: o.domains.returnPathSubdomain,
    ed25519: o.domains.ed25519,
  });
  const domainDeps: DomainDeps = {
    records,
    projection,
    signing,
    clock,
    resolve: dnsResolver({ server: o.dnsServer }),
    platform: {
      returnPathSubdomain: o.domains.returnPathSubdomain,
      spfInclude: o.domains.spfInclude,
      inboundHost: o.domains.inboundHost,
    },
    log,
    recheckMs: o.domains.recheckMs,
  };
  const recheck = new DomainRecheck({ leases, owner: o.owner, log }, domainDeps);
  const parts: DaemonParts = {
    o,
    destinations: new DestinationReports(clock),
    projection,
    runtime,
    refusals,
    accept: accepting,
    sendingState,
    admissionDeps: {
      admission,
      projection,
      writer,
      refusals,
      tags: new TagCache(records.audience),
      verdicts: new VerdictCounts(metrics),
      tickets,
      clock,
      ipv6PrefixBits: o.ipv6PrefixBits,
    },
    runner,
    fanout,
    tickets,
    signing,
    domainDeps,
  };
  // Releases by any daemon on the store wake this daemon's idle lease streams (from its
  // construction: a daemon's RPCs serve before its lanes start); any lane signal wakes the
  // records writer and the reconciliation, which may be this daemon's.
  const unwatch = signals.watchLanes((s) => {
    if (s.kind === "ready") runtime.work.notifyAll();
    writer.changed();
    reconciler.wake();
  });
  let lanes: Lanes | undefined;
  return {
    routes: (router) => daemonRoutes(router, parts),
    raw: {
      ...admissionRawHandlers(parts.admissionDeps),
      ...sendBatchRawHandlers({ accept: accepting, refusals, tickets, clock, log, disk: o.disk }),
    },
    interceptors: [tenantGate(tickets, log)],
    start() {
      writer.start();
      refusals.start();
      fanout.start();
      runner.start();
      reconciler.start();
      recheck.start();
      lanes = startDaemonLanes(o, runtime);
      runtime.recovery = lanes;
    },
    async stopReleasing() {
      await Promise.all([fanout.stop(), runner.stop(), reconciler.stop(), recheck.stop()]);
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

/** Starts both lanes' schedulers and their recovery; each release is recorded in the runtime and counted. */
function startDaemonLanes(o: DaemonOptions, runtime: MailRuntime): Lanes {
  const { metrics } = o;
  const { mail, leases, signals } = o.hot;
  return startLanes({
    mail,
    leases,
    signals,
    clock: o.clock,
    ratePerSecond: o.laneRate,
    owner: o.owner,
    policy: o.policy,
    onRelease: (r) => {
      runtime.recordRelease(r);
      metrics?.released.inc({ lane: laneName(r.lane) });
    },
    onMissed: (lane, slots) => metrics?.slotsMissed.inc({ lane: laneName(lane) }, slots),
    onRecovered: () => {
      runtime.work.notifyAll();
      runtime.onChange();
    },
    log: o.log,
  });
}

/**
 * Every service of the daemon and the table of its handlers. The record-bound services (their
 * calls may carry a deadline and an Idempotency-Key: records_deadline.ts) register through their
 * own router.
 */
export function daemonRoutes(router: ConnectRouter, p: DaemonParts): void {
  const { records, clock, laneRate } = p.o;
  const { admission, mail, usage, lifecycle } = p.o.hot;
  const { projection, runtime } = p;
  const trackingKey = p.o.master.derive("tracking");
  router.service(LimiterService, admissionHandlers(p.admissionDeps));
  router.service(
    DirectoryService,
    directoryHandlers({ admission, records, projection, clock, newToken, signing: p.signing }),
  );
  router.service(Health, healthHandlers({ lifecycle }));
  router.service(MailService, mailHandlers({ mail, records, accept: p.accept, refusals: p.refusals }));
  router.service(
    DeliveryService,
    deliveryHandlers({
      mail,
      suppressions: records.suppressions,
      sending: p.sendingState,
      tracking: { publicUrl: p.o.publicUrl, key: trackingKey },
      runtime,
      clock,
      laneRate,
      visibilityMs: p.o.visibilityMs,
      policy: p.o.policy,
      retryInHours: p.o.retryInHours ?? retryPolicy(),
      signing: p.signing,
    }),
  );
  router.service(LaneService, laneHandlers({ mail, runtime, clock, laneRate }));
  router.service(DestinationService, destinationHandlers(p.destinations));
  router.service(DomainService, domainHandlers(p.domainDeps));
  router.service(
    ConsoleService,
    consoleHandlers({
      usage,
      records,
      projection,
      refusals: p.refusals,
      clock,
      laneRate,
      domains: p.domainDeps,
      newToken,
      ipv6PrefixBits: p.o.ipv6PrefixBits,
      idleMs: p.o.consoleIdleMs,
      tickets: p.tickets,
    }),
  );

  const recordBound = recordBoundRouter(router, records, () => clock.nowMs());
  recordBound.service(WebhookService, webhookHandlers({ records, clock }));
  recordBound.service(WebhookDeliveryService, webhookDeliveryHandlers({ records, clock, policy: p.o.webhookPolicy }));
  // Changes that give the leased loops work wake them (on this daemon; another one's loops come
  // round within their idle wait).
  recordBound.service(AudienceService, audienceHandlers({ records, clock, onChange: () => p.runner.wake() }));
  recordBound.service(AutomationService, automationHandlers({ records, clock, onCampaignSent: () => p.fanout.wake() }));
  recordBound.service(SuppressionService, suppressionHandlers({ records, clock, sending: p.sendingState }));
  recordBound.service(TrackingService, trackingHandlers({ records, clock, key: trackingKey }));
  recordBound.service(
    FeedbackService,
    feedbackHandlers({
      mail,
      records,
      clock,
      log: p.o.log,
      metrics: p.o.metrics,
      sending: p.sendingState,
      returnPathKey: p.o.master.derive("return-path"),
      bounceCooldownMs: p.o.policy.bounceCooldownMs,
    }),
  );
}
