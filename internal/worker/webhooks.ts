import type { Client } from "@connectrpc/connect";
import { MicroBatcher } from "../batch/batcher";
import {
  type WebhookAttemptReport,
  WebhookAttemptResult,
  type WebhookDeliveryService,
  type WebhookTask,
} from "../gen/mailcore/limiter/v1/webhooks_pb";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { isPermanent } from "./retry_policy";
import type { WorkerMetrics } from "../metrics/metrics";
import { ATTEMPT_TIMEOUT_MS } from "../webhooks/schedule";
import { readExcerpt } from "../webhooks/excerpt";
import { webhookTarget } from "../webhooks/target";
import type { Resolve } from "../dnsquery/resolver";

/**
 * The wait after a claim that found nothing: doubled on each such claim up to the second figure,
 * so an idle worker stays quiet (two claims a second), and a delivery that comes due, or another
 * organization's while one holds its share, is started within half a second.
 */
const IDLE_POLL_MS = 250;
const IDLE_POLL_MAX_MS = 500;
const CALL_TIMEOUT_MS = 2_000;
/** A report is retried this long at most; then the lease runs out and the delivery is tried again. */
const REPORT_GIVE_UP_MS = 10_000;
/**
 * The slots of a worker are shared by organization first: one organization's endpoints hold at
 * most this share of them (its failing endpoints leave the rest to the other organizations),
 * and one endpoint at most half of that (one that hangs leaves its organization's others room).
 */
const ORG_SHARE = 1 / 4;
const ENDPOINT_SHARE = 1 / 8;
/** Reports per call: the attempts that end while one report call is under way go in the next. */
const MAX_REPORT_BATCH = 256;

/** The daemon's calls the webhook deliverer makes: its claims and its reports. */
export type WebhookDeliveryCalls = Pick<
  Client<typeof WebhookDeliveryService>,
  "claimWebhookDeliveries" | "reportWebhookAttempts"
>;

export interface WebhookDelivererOptions {
  workerId: string;
  /** Attempts under way at once. */
  concurrency: number;
  /** Whether URLs on loopback and private networks may be called (development, tests). */
  allowPrivateUrls: boolean;
  /** Resolves each attempt's host (DNS_SERVER, or the system's resolvers). */
  resolve: Resolve;
  log: Logger;
  metrics?: WorkerMetrics;
}

/** What one attempt came to: the receiver's status and the start of its answer, or why there was none. */
export interface AttemptOutcome {
  statusCode: number;
  error: string;
  durationMs: number;
  /** Never logged: a receiver's answer may carry anything. */
  responseExcerpt: string;
}

/** How an attempt finds its receiver. */
export interface AttemptOptions {
  /** Whether URLs on loopback and private networks may be called (development, tests). */
  allowPrivateUrls: boolean;
  /** Resolves the URL's host: once per attempt, and the request connects to what it answered. */
  resolve: Resolve;
}

/**
 * POSTs one signed webhook to the address its host resolved to and was checked (target.ts), with
 * the URL's Host and TLS server name. Redirects are not followed (a 3xx is a failure, like any
 * non-2xx); of the answer's body only an excerpt is read. The duration is until the answer's status.
 */
export async function attemptWebhook(task: WebhookTask, o: AttemptOptions): Promise<AttemptOutcome> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  try {
    const found = await webhookTarget(task.url, o.resolve, o.allowPrivateUrls);
    if (!found.ok) return { statusCode: 0, error: found.error, durationMs: took(), responseExcerpt: "" };
    const { target } = found;
    const res = await fetch(target.connectUrl, {
      method: "POST",
      redirect: "manual",
      headers: {
        Host: target.host,
        "Content-Type": "application/json",
        "User-Agent": "mailcore-webhooks",
        "webhook-id": task.webhookId,
        "webhook-timestamp": String(task.webhookTimestamp),
        "webhook-signature": task.webhookSignature,
      },
      body: task.body,
      tls: target.serverName === undefined ? undefined : { serverName: target.serverName },
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
    });
    const durationMs = took();
    return { statusCode: res.status, error: "", durationMs, responseExcerpt: await readExcerpt(res) };
  } catch (err) {
    const e = err as Error;
    const error = e.name === "TimeoutError" ? `no answer within ${ATTEMPT_TIMEOUT_MS / 1_000} s` : e.message;
    return { statusCode: 0, error, durationMs: took(), responseExcerpt: "" };
  }
}

function resultLabel(o: AttemptOutcome): string {
  return o.statusCode === 0 ? "error" : `${Math.floor(o.statusCode / 100)}xx`;
}

/**
 * Drains the daemon's queue of due webhook deliveries, apart from the mail: its own claims, its
 * own concurrency, so a receiver that hangs holds a webhook slot for 15 s at most and never a
 * mail delivery; one organization's endpoints at most a quarter of the slots, and one endpoint
 * an eighth, so the other organizations keep theirs. Each claim is a lease: a worker that dies
 * mid-attempt leaves the delivery due again when the lease ends (at-least-once, the same webhook-id).
 */
export class WebhookDeliverer {
  private readonly abort = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  /** Attempts under way by endpoint id. */
  private readonly byEndpoint = new Map<string, number>();
  private readonly claimFailing: FailureEpisode;
  private readonly reportFailing: FailureEpisode;
  private readonly reports: MicroBatcher<Omit<WebhookAttemptReport, "$typeName">, WebhookAttemptResult>;

  constructor(
    private readonly calls: WebhookDeliveryCalls,
    private readonly o: WebhookDelivererOptions,
  ) {
    this.claimFailing = new FailureEpisode(o.log, "webhook claim");
    this.reportFailing = new FailureEpisode(o.log, "webhook report");
    this.reports = new MicroBatcher(
      async (reports) => (await calls.reportWebhookAttempts({ reports }, { timeoutMs: CALL_TIMEOUT_MS })).results,
      MAX_REPORT_BATCH,
    );
  }

  async run(): Promise<void> {
    const signal = this.abort.signal;
    let idleMs = IDLE_POLL_MS;
    while (!signal.aborted) {
      if (this.inFlight.size >= this.o.concurrency) {
        await Promise.race(this.inFlight);
        continue;
      }
      let tasks: WebhookTask[] = [];
      try {
        const res = await this.calls.claimWebhookDeliveries(
          {
            workerId: this.o.workerId,
            max: this.o.concurrency - this.inFlight.size,
            maxPerEndpoint: Math.max(1, Math.floor(this.o.concurrency * ENDPOINT_SHARE)),
            maxPerOrg: Math.max(1, Math.floor(this.o.concurrency * ORG_SHARE)),
            inFlight: Object.fromEntries(this.byEndpoint),
          },
          { timeoutMs: CALL_TIMEOUT_MS, signal },
        );
        tasks = res.tasks;
        this.claimFailing.succeeded();
      } catch (err) {
        if (signal.aborted) break;
        this.claimFailing.failed(err as Error);
      }
      for (const task of tasks) this.track(this.deliver(task));
      if (tasks.length > 0) idleMs = IDLE_POLL_MS;
      else {
        await Bun.sleep(idleMs);
        idleMs = Math.min(idleMs * 2, IDLE_POLL_MAX_MS);
      }
    }
  }

  /** Stops claiming and waits up to graceMs for the attempts under way; one left unreported is tried again when its lease ends. */
  async stop(graceMs = 5_000): Promise<void> {
    this.abort.abort();
    await Promise.race([Promise.all(this.inFlight), Bun.sleep(graceMs)]);
  }

  private countEndpoint(id: string, by: number): void {
    const n = (this.byEndpoint.get(id) ?? 0) + by;
    if (n > 0) this.byEndpoint.set(id, n);
    else this.byEndpoint.delete(id);
  }

  private track(job: Promise<void>): void {
    const tracked = job.finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  private async deliver(task: WebhookTask): Promise<void> {
    this.countEndpoint(task.endpointId, 1);
    const outcome = await attemptWebhook(task, this.o); // never throws: a failure is an outcome
    this.countEndpoint(task.endpointId, -1);
    this.o.metrics?.webhookAttempts.inc({ result: resultLabel(outcome) });
    const result = await this.report(task, outcome);
    // Successes are counted, not logged (the deliveries list has them); anything else is logged.
    if (result === WebhookAttemptResult.DELIVERED) return;
    this.o.log.info("webhook attempt", {
      delivery: task.deliveryId,
      attempt: task.attempt,
      status: outcome.statusCode,
      error: outcome.error || undefined,
      ms: outcome.durationMs,
      result: result === undefined ? "unreported" : WebhookAttemptResult[result].toLowerCase(),
    });
  }

  /** Reports an attempt until the daemon takes it; undefined when it never did (the lease then runs out). */
  private async report(task: WebhookTask, o: AttemptOutcome): Promise<WebhookAttemptResult | undefined> {
    const giveUpAt = performance.now() + REPORT_GIVE_UP_MS;
    let waitMs = 100;
    for (;;) {
      try {
        const result = await this.reports.submit({
          deliveryId: task.deliveryId,
          leaseToken: task.leaseToken,
          statusCode: o.statusCode,
          error: o.error,
          durationMs: o.durationMs,
          responseExcerpt: o.responseExcerpt,
        });
        this.reportFailing.succeeded();
        return result;
      } catch (err) {
        if (isPermanent(err)) return undefined;
        this.reportFailing.failed(err as Error);
        if (performance.now() + waitMs > giveUpAt) return undefined;
        await Bun.sleep(waitMs);
        waitMs = Math.min(waitMs * 2, 1_000);
      }
    }
  }
}
