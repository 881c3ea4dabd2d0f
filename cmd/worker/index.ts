// worker: leases released messages from limiterd, delivers them, acks; and, apart from the
// mail, delivers due webhooks and reports each attempt.
import { join } from "node:path";
import { hostname } from "node:os";
import { loadOrExit, workerConfig } from "../../internal/config/config";
import { privateDataDir } from "../../internal/datadir/datadir";
import { DeliveryService } from "../../internal/gen/mailcore/limiter/v1/mail_pb";
import { WebhookDeliveryService } from "../../internal/gen/mailcore/limiter/v1/webhooks_pb";
import { daemonConnection } from "../../internal/limiterclient/client";
import { logger, setLogFormat } from "../../internal/log/log";
import { DiskSpace } from "../../internal/diskspace/diskspace";
import { dnsResolver } from "../../internal/dnsquery/resolver";
import {
  certificateExpiry,
  diskFullCounter,
  mxMetrics,
  newRegistry,
  serveMetrics,
  workerMetrics,
} from "../../internal/metrics/metrics";
import { exitGracefully } from "../../internal/shutdown/shutdown";
import { AckJournal } from "../../internal/worker/acks";
import { deliveryTransport } from "../../internal/worker/delivery";
import { MxTransport } from "../../internal/worker/mx_transport";
import { DestinationReporter } from "../../internal/worker/destinations";
import { DestinationService } from "../../internal/gen/mailcore/limiter/v1/destinations_pb";
import { WebhookDeliverer } from "../../internal/worker/webhooks";
import { Worker } from "../../internal/worker/worker";

const log = logger("worker");
const cfg = loadOrExit("worker", () => workerConfig(process.env));
setLogFormat(cfg.logFormat);
privateDataDir(cfg.dataDir, log);
const registry = newRegistry("worker");
// The ack journal and the file sink write under DATA_DIR: a full disk defers, and is logged and counted.
const disk = new DiskSpace(cfg.dataDir, log, diskFullCounter(registry));
const resolve = dnsResolver({ server: cfg.dnsServer });
const transport = deliveryTransport(cfg, disk, resolve);
certificateExpiry(registry, { LIMITER_TLS_CLIENT_CERT: cfg.limiterTls?.cert, LIMITER_TLS_CA: cfg.limiterTls?.ca });
const daemon = daemonConnection(cfg.limiterUrl, cfg.limiterCredential);
const workerId = `${hostname()}:${process.pid}`;
const metrics = workerMetrics(registry);
// MX delivery's destinations: in the metrics, and reported to the daemon for `admin destinations`.
const reporter =
  transport instanceof MxTransport
    ? new DestinationReporter(daemon.client(DestinationService), workerId, () => transport.states())
    : undefined;
if (transport instanceof MxTransport) mxMetrics(registry, () => transport.states());
const worker = new Worker(daemon.client(DeliveryService), transport, {
  workerId,
  maxInFlight: cfg.maxInFlight,
  log,
  acks: new AckJournal(join(cfg.dataDir, "acks"), disk),
  disk,
  metrics,
});
const webhooks = new WebhookDeliverer(daemon.client(WebhookDeliveryService), {
  workerId,
  concurrency: cfg.webhookConcurrency,
  allowPrivateUrls: cfg.webhookAllowPrivateUrls,
  resolve,
  log,
  metrics,
});
const metricsServer = serveMetrics(registry, cfg.metricsHost, cfg.metricsPort, log);
log.info("started", {
  delivery: cfg.delivery,
  transport: transport.name,
  limiter: cfg.limiterUrl,
  concurrency: cfg.maxInFlight,
  webhookConcurrency: cfg.webhookConcurrency,
});
void worker.run();
void webhooks.run();
reporter?.start();

// Stop leasing, finish the deliveries under way (or cut them off: deferred, retried later),
// ack what can be acked; the rest stays in DATA_DIR/acks for the next start.
exitGracefully(log, async () => {
  reporter?.stop();
  await Promise.all([worker.stop(), webhooks.stop()]);
  disk.stop();
  metricsServer.stop();
});
