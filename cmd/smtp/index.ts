// smtp: the SMTP submission front. STARTTLS, AUTH with an API token (checked by limiterd),
// each message forwarded to POST /api/v1/emails.
import { loadOrExit, smtpConfig } from "../../internal/config/config";
import { privateDataDir } from "../../internal/datadir/datadir";
import { DirectoryService } from "../../internal/gen/mailcore/limiter/v1/limiter_pb";
import { daemonConnection } from "../../internal/limiterclient/client";
import { logger, setLogFormat } from "../../internal/log/log";
import { DiskSpace } from "../../internal/diskspace/diskspace";
import {
  certificateExpiry,
  diskFullCounter,
  newRegistry,
  serveMetrics,
  smtpMetrics,
} from "../../internal/metrics/metrics";
import { exitGracefully } from "../../internal/shutdown/shutdown";
import { apiClient } from "../../internal/smtp/api";
import { submissionServer } from "../../internal/smtp/server";
import { frontTls } from "../../internal/smtp/tls";
import { tokenVerifier } from "../../internal/smtp/verify";

const log = logger("smtp");
const cfg = loadOrExit("smtp", () => smtpConfig(process.env));
setLogFormat(cfg.logFormat);
privateDataDir(cfg.dataDir, log);
const registry = newRegistry("smtp");
const disk = new DiskSpace(cfg.dataDir, log, diskFullCounter(registry));
const { files, tls } = await frontTls("smtp", { dataDir: cfg.dataDir, cert: cfg.tlsCert, key: cfg.tlsKey }, disk);
if (files.source === "self-signed") {
  log.warn("using a self-signed development certificate; set SMTP_TLS_CERT and SMTP_TLS_KEY in production", {
    cert: files.unkept ? "held in memory (no room on the disk); the next start writes it" : files.cert,
  });
}

const directory = daemonConnection(cfg.limiterUrl, cfg.limiterCredential).client(DirectoryService);
certificateExpiry(registry, {
  LIMITER_TLS_CLIENT_CERT: cfg.limiterTls?.cert,
  LIMITER_TLS_CA: cfg.limiterTls?.ca,
  SMTP_TLS_CERT: tls.cert,
});
const server = submissionServer(
  {
    verifyToken: tokenVerifier(directory, cfg.limiterTimeoutMs),
    api: apiClient(cfg.apiUrl, cfg.apiTimeoutMs),
    log,
    metrics: smtpMetrics(registry),
  },
  {
    tls,
    maxClients: cfg.maxClients,
    maxClientsPerIp: cfg.maxClientsPerIp,
    maxWaitingPerIp: cfg.maxWaitingPerIp,
    maxSessionsPerOrg: cfg.maxSessionsPerOrg,
    authTimeoutMs: cfg.authTimeoutMs,
    authFailuresPerIp: cfg.authFailuresPerIp,
    socketTimeoutMs: cfg.socketTimeoutMs,
    sessionTimeoutMs: cfg.sessionTimeoutMs,
    ipv6PrefixBits: cfg.ipv6PrefixBits,
  },
);

server.listen(cfg.port, cfg.host, () => {
  log.info("listening", {
    url: `smtp://${cfg.host}:${cfg.port}`,
    tls: files.source,
    api: cfg.apiUrl,
    limiter: cfg.limiterUrl,
    maxClients: cfg.maxClients,
  });
});
server.server.on("error", (err: Error) => {
  log.error("cannot listen", { error: err.message });
  process.exit(1);
});

const metricsServer = serveMetrics(registry, cfg.metricsHost, cfg.metricsPort, log);

// Stop accepting; idle connections get a 421 now, a message being forwarded gets its answer
// and then the 421; what is still open after 8 s is cut off.
exitGracefully(log, async () => {
  server.drain();
  await new Promise<void>((done) => server.close(() => done()));
  disk.stop();
  metricsServer.stop();
});
