// Prometheus metrics (prom-client): every metric name of docs/operations.md ("Metrics") is defined
// here, once, per process, each on the process's own registry with the default process
// metrics (CPU, memory, event-loop lag, file descriptors).
import client from "prom-client";
import type { Logger } from "../log/log";

export type Registry = client.Registry;

export function newRegistry(processName: string): Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ process: processName });
  client.collectDefaultMetrics({ register: registry });
  return registry;
}

export interface ApiMetrics {
  requests: client.Counter<"route" | "status">;
  duration: client.Histogram<"route">;
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
  };
}

export interface LimiterMetrics {
  admissions: client.Counter<"verdict">;
  released: client.Counter<"lane">;
}

/** The daemon's metrics; lane depth is read from the store when scraped. */
export function limiterMetrics(
  registry: Registry,
  laneDepths: () => Promise<{ lane: string; depth: number }[]>,
): LimiterMetrics {
  new client.Gauge({
    name: "mailcore_lane_depth",
    help: "Messages waiting for release, by lane",
    labelNames: ["lane"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const { lane, depth } of await laneDepths().catch(() => [])) this.set({ lane }, depth);
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
