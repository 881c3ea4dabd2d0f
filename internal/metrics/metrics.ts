// Prometheus metrics (prom-client): every metric name of docs/operations.md ("Metrics") is defined
// here, once, per process, each on the process's own registry with the default process
// metrics (CPU, memory, event-loop lag, file descriptors).
import { X509Certificate } from "node:crypto";
import client from "prom-client";
import type { Logger } from "../log/log";

export type Registry = client.Registry;

const EVENT_LOOP_SAMPLE_MS = 1_000;

export function newRegistry(processName: string): Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ process: processName });
  // The event-loop delay is sampled once a second, not every 10 ms (prom-client's default): on
  // Bun the sampling is a timer, and at 10 ms it was most of an idle daemon's wake-ups.
  client.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return registry;
}

/** The certificates in a PEM file (a CA file may be a bundle: during a rotation it holds two). */
function pemCertificates(pem: Buffer | string): X509Certificate[] {
  const blocks = String(pem).match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b));
}

/**
 * When each certificate the process was started with expires, as a Unix time, by the variable
 * that named its file (certificates are read at start, so the value holds until a restart). A
 * bundle reports its latest expiry: during a CA rotation the new CA is the one that counts.
 */
export function certificateExpiry(registry: Registry, files: Record<string, Buffer | string | undefined>): void {
  const gauge = new client.Gauge({
    name: "mailcore_tls_certificate_expiry_seconds",
    help: "When a certificate this process was started with expires (Unix time), by the variable naming its file",
    labelNames: ["file"],
    registers: [registry],
  });
  for (const [file, pem] of Object.entries(files)) {
    if (pem === undefined) continue;
    const expiries = pemCertificates(pem).map((c) => Date.parse(c.validTo) / 1_000);
    if (expiries.length > 0) gauge.set({ file }, Math.max(...expiries));
  }
}

export interface ApiMetrics {
  requests: client.Counter<"route" | "status">;
  duration: client.Histogram<"route">;
  admissionsUnavailable: client.Counter;
}

export function apiMetrics(registry: Registry): ApiMetrics {
  return {
    requests: new client.Counter({
      name: "mailcore_http_requests_total",
      help: "HTTP requests answered, by route and status",
      labelNames: ["route", "status"],
      registers: [registry],
    }),
    duration: new client.Histogram({
      name: "mailcore_http_request_duration_seconds",
      help: "Time from the request to the response, by route",
      labelNames: ["route"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    admissionsUnavailable: new client.Counter({
      name: "mailcore_admissions_unavailable_total",
      help: "Requests refused with 503 LIMITER_UNAVAILABLE because limiterd could not admit them in time",
      registers: [registry],
    }),
  };
}

export interface LimiterMetrics {
  admissions: client.Counter<"verdict">;
  released: client.Counter<"lane">;
  slotsMissed: client.Counter<"lane">;
  recordsWriterFailures: client.Counter<"task">;
  reconciled: client.Counter<"action">;
  /** An organization's complaints per delivered message over the last 24 hours, set at each complaint. */
  complaintRate: client.Gauge<"org">;
}

/** What the daemon's gauges read from its store when scraped. */
export interface LimiterGauges {
  /** Each lane's messages waiting for release, and how long the oldest has waited. */
  lanes(): Promise<{ lane: string; depth: number; oldestAgeMs: number }[]>;
  /** Whether the daemon serves: its hot store answers (the health check's SERVING). */
  ready(): Promise<boolean>;
  /** How many sending domains' last check found an active DKIM key's record failed (they sign on). */
  dkimFailing(): Promise<number>;
}

/** The daemon's metrics; the lanes and readiness are read from the store when scraped. */
export function limiterMetrics(registry: Registry, gauges: LimiterGauges): LimiterMetrics {
  // Both lane gauges are collected at once on a scrape: they share one read of the store.
  let reading: ReturnType<LimiterGauges["lanes"]> | undefined;
  const lanes = () =>
    (reading ??= gauges
      .lanes()
      .catch(() => [])
      .finally(() => {
        reading = undefined;
      }));
  new client.Gauge({
    name: "mailcore_lane_depth",
    help: "Messages waiting for release, by lane",
    labelNames: ["lane"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const { lane, depth } of await lanes()) this.set({ lane }, depth);
    },
  });
  new client.Gauge({
    name: "mailcore_lane_oldest_age_seconds",
    help: "How long the oldest message waiting for release has waited, by lane (0: none waits)",
    labelNames: ["lane"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const { lane, oldestAgeMs } of await lanes()) this.set({ lane }, oldestAgeMs / 1_000);
    },
  });
  new client.Gauge({
    name: "mailcore_ready",
    help: "1 when the daemon serves (its hot store answers), 0 when it does not",
    registers: [registry],
    async collect() {
      this.set((await gauges.ready().catch(() => false)) ? 1 : 0);
    },
  });
  new client.Gauge({
    name: "mailcore_domains_dkim_failing",
    help: "Sending domains whose last check found an active DKIM key's record missing or wrong: their mail is still signed, and fails DKIM at receivers",
    registers: [registry],
    async collect() {
      this.set(await gauges.dkimFailing().catch(() => 0));
    },
  });
  return {
    admissions: new client.Counter({
      name: "mailcore_admissions_total",
      help: "Admission decisions, by verdict",
      labelNames: ["verdict"],
      registers: [registry],
    }),
    released: new client.Counter({
      name: "mailcore_lane_released_total",
      help: "Messages released by the lane schedulers, by lane",
      labelNames: ["lane"],
      registers: [registry],
    }),
    slotsMissed: new client.Counter({
      name: "mailcore_lane_slots_missed_total",
      help: "Slots a backlogged lane lost because its scheduler was late past the lane's lead (the daemon stalled), by lane",
      labelNames: ["lane"],
      registers: [registry],
    }),
    recordsWriterFailures: new client.Counter({
      name: "mailcore_records_writer_failures_total",
      help: "Rounds of the records writer that failed (the hot store keeps what it could not write), by task",
      // Not "job": Prometheus sets job on every series it scrapes and would rename this one exported_job.
      labelNames: ["task"],
      registers: [registry],
    }),
    complaintRate: new client.Gauge({
      name: "mailcore_org_complaint_rate",
      help: "An organization's complaints per delivered message over the last 24 hours, as of its last complaint (by organization id)",
      labelNames: ["org"],
      registers: [registry],
    }),
    reconciled: new client.Counter({
      name: "mailcore_reconciled_messages_total",
      help: "Messages the reconciliation found the hot store had lost or had stale: requeued (put back in their lane), finished (put back with a kept ack's outcome), dropped (a copy older than the records)",
      labelNames: ["action"],
      registers: [registry],
    }),
  };
}

export interface SmtpMetrics {
  replies: client.Counter<"code">;
}

export function smtpMetrics(registry: Registry): SmtpMetrics {
  return {
    replies: new client.Counter({
      name: "mailcore_smtp_replies_total",
      help: "Replies to MAIL transactions and AUTH, by basic code",
      labelNames: ["code"],
      registers: [registry],
    }),
  };
}

export interface InboundMetrics {
  /** What the inbound MX did with a report: kind (dsn, arf, none) and outcome (applied, ignored, untied, pending, forged, malformed, unavailable). */
  reports: client.Counter<"kind" | "outcome">;
  /** RCPT TO refused: not one of our return paths (not-ours), a return path whose HMAC is wrong (forged), the daemon unreachable (unavailable). */
  recipientsRefused: client.Counter<"reason">;
}

export function inboundMetrics(registry: Registry): InboundMetrics {
  return {
    reports: new client.Counter({
      name: "mailcore_inbound_reports_total",
      help: "Bounces and complaints received by the inbound MX, by kind and outcome",
      labelNames: ["kind", "outcome"],
      registers: [registry],
    }),
    recipientsRefused: new client.Counter({
      name: "mailcore_inbound_recipients_refused_total",
      help: "RCPT TO refused by the inbound MX, by reason",
      labelNames: ["reason"],
      registers: [registry],
    }),
  };
}

export interface WorkerMetrics {
  deliveries: client.Counter<"outcome">;
  pendingAcks: client.Gauge;
  webhookAttempts: client.Counter<"result">;
}

export function workerMetrics(registry: Registry): WorkerMetrics {
  return {
    deliveries: new client.Counter({
      name: "mailcore_deliveries_total",
      help: "Delivery attempts, by outcome",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    pendingAcks: new client.Gauge({
      name: "mailcore_worker_pending_acks",
      help: "Delivery results not yet accepted by limiterd",
      registers: [registry],
    }),
    webhookAttempts: new client.Counter({
      name: "mailcore_webhook_attempts_total",
      help: "Webhook attempts, by result (2xx, 4xx, 5xx, error)",
      labelNames: ["result"],
      registers: [registry],
    }),
  };
}

/** A destination of MX delivery as the metrics show it (internal/mx's DestinationState). */
export interface MxDestinationGauge {
  key: string;
  queued: number;
  connections: number;
  slowedUntilMs: number;
  suspendedUntilMs: number;
  failingSinceMs: number;
}

/**
 * MX delivery's destinations on the worker, read from the transport on each scrape: the
 * messages waiting in each destination's queue, its connections, until when it is slowed down
 * or suspended, and since when its tries have been failing (Unix seconds; 0: not). A destination
 * is labelled by its MX host names; only those the worker knows now are listed (a failing one
 * stays listed between the retries of its mail).
 */
export function mxMetrics(registry: Registry, states: () => MxDestinationGauge[]): void {
  const gauges = {
    queued: ["mailcore_mx_destination_queued", "Messages waiting in a destination's queue for its connections"],
    connections: ["mailcore_mx_destination_connections", "Connections open or opening to a destination"],
    slowedUntilMs: [
      "mailcore_mx_destination_slowed_until_seconds",
      "Until when a destination is slowed down after a reply said we send too fast (Unix seconds; past or 0: not slowed)",
    ],
    suspendedUntilMs: [
      "mailcore_mx_destination_suspended_until_seconds",
      "Until when a destination none of whose addresses gave a session is suspended (Unix seconds; past or 0: not)",
    ],
    failingSinceMs: [
      "mailcore_mx_destination_failing_since_seconds",
      "Since when a destination's tries have failed for now, with no success since (Unix seconds; 0: not failing)",
    ],
  } as const;
  for (const [field, [name, help]] of Object.entries(gauges) as [keyof typeof gauges, readonly [string, string]][]) {
    new client.Gauge({
      name,
      help,
      labelNames: ["destination"],
      registers: [registry],
      collect() {
        this.reset();
        for (const s of states()) {
          const v = s[field];
          this.set({ destination: s.key }, field.endsWith("Ms") ? v / 1_000 : v);
        }
      },
    });
  }
}

/** Writes refused for want of space (ENOSPC, EDQUOT, SQLite's "disk is full"), by what could not be written. */
export function diskFullCounter(registry: Registry): client.Counter<"file"> {
  return new client.Counter({
    name: "mailcore_disk_full_total",
    help: "Writes refused for want of space (the filesystem full, or the quota spent), by what could not be written: acks, sink, store, certificate",
    labelNames: ["file"],
    registers: [registry],
  });
}

/** Serves the registry at http://host:port/metrics; port 0 serves nothing. */
export function serveMetrics(registry: Registry, host: string, port: number, log: Logger): { stop(): void } {
  if (port === 0) return { stop() {} };
  const server = Bun.serve({
    hostname: host,
    port,
    async fetch(req) {
      if (!URL.canParse(req.url) || new URL(req.url).pathname !== "/metrics")
        return new Response("Metrics are at /metrics\n", { status: 404 });
      return new Response(await registry.metrics(), { headers: { "Content-Type": registry.contentType } });
    },
  });
  log.info("metrics", { url: `http://${host}:${server.port}/metrics` });
  return { stop: () => void server.stop(true) };
}
