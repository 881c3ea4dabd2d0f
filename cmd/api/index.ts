// api: the HTTP front. Every API request is admitted by limiterd; nothing is served without it.
// Beside the API: the console (/console) and the reference (/docs), thin pages over limiterd.
import { daemonPorts } from "../../internal/api/daemon_ports";
import { serveApi } from "../../internal/api/server";
import { offloadedValidation } from "../../internal/api/validation";
import { apiConfig, loadOrExit } from "../../internal/config/config";
import { DomainService } from "../../internal/gen/mailcore/limiter/v1/domains_pb";
import { Health } from "../../internal/gen/grpc/health/v1/health_pb";
import { AudienceService } from "../../internal/gen/mailcore/limiter/v1/audience_pb";
import { TrackingService } from "../../internal/gen/mailcore/limiter/v1/feedback_pb";
import { SuppressionService } from "../../internal/gen/mailcore/limiter/v1/suppressions_pb";
import { AutomationService } from "../../internal/gen/mailcore/limiter/v1/automation_pb";
import { ConsoleService } from "../../internal/gen/mailcore/limiter/v1/console_pb";
import { MailService } from "../../internal/gen/mailcore/limiter/v1/mail_pb";
import { WebhookService } from "../../internal/gen/mailcore/limiter/v1/webhooks_pb";
import { admitBatchCaller } from "../../internal/limiterclient/admit";
import { daemonConnection } from "../../internal/limiterclient/client";
import { sendBatchCaller } from "../../internal/limiterclient/send_batch";
import { logger, setLogFormat } from "../../internal/log/log";
import { apiMetrics, certificateExpiry, newRegistry, serveMetrics } from "../../internal/metrics/metrics";
import { exitGracefully } from "../../internal/shutdown/shutdown";
import { apiSite } from "../../internal/site/site";

const log = logger("api");
const cfg = loadOrExit("api", () => apiConfig(process.env));
setLogFormat(cfg.logFormat);
const daemon = daemonConnection(cfg.limiterUrl, cfg.limiterCredential);
const clients = {
  admitBatch: admitBatchCaller(cfg.limiterUrl, cfg.limiterCredential),
  sendBatch: sendBatchCaller(cfg.limiterUrl, cfg.limiterCredential),
  health: daemon.client(Health),
  mail: daemon.client(MailService),
  webhooks: daemon.client(WebhookService),
  audience: daemon.client(AudienceService),
  automation: daemon.client(AutomationService),
  domains: daemon.client(DomainService),
  suppressions: daemon.client(SuppressionService),
};
const validation = offloadedValidation({ workers: cfg.validationWorkers, timeoutMs: cfg.validationTimeoutMs });
const ports = {
  ...daemonPorts(clients, { timeoutMs: cfg.limiterTimeoutMs, recordsTimeoutMs: cfg.audienceTimeoutMs, log }),
  validation,
};
const site = apiSite(
  {
    console: daemon.client(ConsoleService),
    audience: clients.audience,
    automation: clients.automation,
    mail: clients.mail,
    webhooks: clients.webhooks,
    suppressions: clients.suppressions,
    tracking: daemon.client(TrackingService),
    admission: ports.admission,
  },
  { timeoutMs: cfg.limiterTimeoutMs, trustProxy: cfg.trustProxy, log },
);
const registry = newRegistry("api");
certificateExpiry(registry, { LIMITER_TLS_CLIENT_CERT: cfg.limiterTls?.cert, LIMITER_TLS_CA: cfg.limiterTls?.ca });
const server = serveApi(
  ports,
  {
    trustProxy: cfg.trustProxy,
    docsUrl: cfg.docsUrl,
    recordsTimeoutMs: cfg.audienceTimeoutMs,
    log,
    metrics: apiMetrics(registry),
    site,
  },
  cfg.host,
  cfg.port,
);
const metricsServer = serveMetrics(registry, cfg.metricsHost, cfg.metricsPort, log);
log.info("listening", { url: `http://${cfg.host}:${server.port}`, limiter: cfg.limiterUrl });

// Stop accepting; the requests under way are answered, then the threads go.
exitGracefully(log, async () => {
  await server.stop();
  metricsServer.stop();
  await validation.close();
});
