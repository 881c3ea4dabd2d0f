// inbound: the inbound MX for the platform's own addresses (the return paths and FBL_ADDRESS):
// bounces and complaints, read and handed to limiterd. A process of its own (docs/adr/0048).
import { inboundConfig, loadOrExit } from "../../internal/config/config";
import { privateDataDir } from "../../internal/datadir/datadir";
import { DiskSpace } from "../../internal/diskspace/diskspace";
import { FeedbackService } from "../../internal/gen/mailcore/limiter/v1/feedback_pb";
import { inboundServer } from "../../internal/inbound/server";
import { daemonConnection } from "../../internal/limiterclient/client";
import { logger, setLogFormat } from "../../internal/log/log";
import {
  certificateExpiry,
  diskFullCounter,
  inboundMetrics,
  newRegistry,
  serveMetrics,
} from "../../internal/metrics/metrics";
import { exitGracefully } from "../../internal/shutdown/shutdown";
import { frontTls } from "../../internal/smtp/tls";

const log = logger("inbound");
const cfg = loadOrExit("inbound", () => inboundConfig(process.env));
setLogFormat(cfg.logFormat);
privateDataDir(cfg.dataDir, log);
const registry = newRegistry("inbound");
const disk = new DiskSpace(cfg.dataDir, log, diskFullCounter(registry));
// A sending MTA's STARTTLS verifies no certificate: the development one serves off loopback too.
const { files, tls } = await frontTls("inbound", { dataDir: cfg.dataDir, cert: cfg.tlsCert, key: cfg.tlsKey }, disk);
certificateExpiry(registry, {
  LIMITER_TLS_CLIENT_CERT: cfg.limiterTls?.cert,
  LIMITER_TLS_CA: cfg.limiterTls?.ca,
  INBOUND_TLS_CERT: tls.cert,
});

const server = inboundServer(
  {
    feedback: daemonConnection(cfg.limiterUrl, cfg.limiterCredential).client(FeedbackService),
    log,
    metrics: inboundMetrics(registry),
  },
  {
    tls,
    fblAddresses: cfg.fblAddresses,
    limiterTimeoutMs: cfg.limiterTimeoutMs,
    maxClients: cfg.maxClients,
    maxClientsPerIp: cfg.maxClientsPerIp,
    maxWaitingPerIp: cfg.maxWaitingPerIp,
    socketTimeoutMs: cfg.socketTimeoutMs,
    sessionTimeoutMs: cfg.sessionTimeoutMs,
    ipv6PrefixBits: cfg.ipv6PrefixBits,
  },
);
server.listen(cfg.port, cfg.host, () => {
  log.info("listening", {
    url: `smtp://${cfg.host}:${cfg.port}`,
    tls: files.source,
    limiter: cfg.limiterUrl,
    fbl: cfg.fblAddresses.join(","),
  });
});
server.server.on("error", (err: Error) => {
  log.error("cannot listen", { error: err.message });
  process.exit(1);
});
const metricsServer = serveMetrics(registry, cfg.metricsHost, cfg.metricsPort, log);

exitGracefully(log, async () => {
  server.drain();
  await new Promise<void>((done) => server.close(() => done()));
  disk.stop();
  metricsServer.stop();
});
