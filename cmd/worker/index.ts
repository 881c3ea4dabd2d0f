// worker: leases released messages from limiterd, delivers them, acks.
import { join } from "node:path";
import { hostname } from "node:os";
import { loadOrExit, workerConfig } from "../../internal/config/config";
import { limiterClients } from "../../internal/limiterclient/client";
import { logger } from "../../internal/log/log";
import { FileSink, SmtpRelay } from "../../internal/worker/transport";
import { Worker } from "../../internal/worker/worker";

const log = logger("worker");
const cfg = loadOrExit("worker", () => workerConfig(process.env));
const transport = cfg.relayUrl ? new SmtpRelay(cfg.relayUrl) : new FileSink(join(cfg.dataDir, "sink"));
const worker = new Worker(limiterClients(cfg.limiterUrl), transport, { workerId: `${hostname()}:${process.pid}`, maxInFlight: cfg.maxInFlight, log });

if (cfg.metricsPort > 0) {
  Bun.serve({
    hostname: cfg.metricsHost,
    port: cfg.metricsPort,
    fetch: () =>
      new Response(
        Object.entries(worker.counters)
          .map(([name, value]) => `mailcore_worker_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total ${value}`)
          .join("\n") + "\n",
        { headers: { "Content-Type": "text/plain; version=0.0.4" } },
      ),
  });
}
log.info("started", { transport: transport.name, limiter: cfg.limiterUrl, concurrency: cfg.maxInFlight });
void worker.run();

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    log.info("stopping", { signal });
    await Promise.race([worker.stop(), Bun.sleep(5_000)]);
    process.exit(0);
  });
}
