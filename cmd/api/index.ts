// api: the HTTP front. Every API request is admitted by limiterd; nothing is served without it.
// Beside the API: the console (/console) and the reference (/docs), thin pages over limiterd.
import { daemonDeps } from "../../internal/api/deps";
import { serveApi } from "../../internal/api/server";
import { offloadedValidation } from "../../internal/api/validation";
import { apiConfig, loadOrExit } from "../../internal/config/config";
import { limiterClients } from "../../internal/limiterclient/client";
import { logger, setLogFormat } from "../../internal/log/log";
import { apiMetrics, certificateExpiry, newRegistry, serveMetrics } from "../../internal/metrics/metrics";
import { exitGracefully } from "../../internal/shutdown/shutdown";
import { apiSite } from "../../internal/site/site";

const log = logger("api");
const cfg = loadOrExit("api", () => apiConfig(process.env));
setLogFormat(cfg.logFormat);
const clients = limiterClients(cfg.limiterUrl, cfg.limiterTls);
const validation = offloadedValidation({ workers: cfg.validationWorkers, timeoutMs: cfg.validationTimeoutMs });
const deps = daemonDeps(clients, {
  timeoutMs: cfg.limiterTimeoutMs,
  audienceTimeoutMs: cfg.audienceTimeoutMs,
  trustProxy: cfg.trustProxy,
  docsUrl: cfg.docsUrl,
  log,
  validation,
});
const site = apiSite(
  {
    daemon: clients.console,
    audience: clients.audience,
    automation: clients.automation,
    timeoutMs: cfg.limiterTimeoutMs,
    trustProxy: cfg.trustProxy,
    log,
  },
  deps.admit,
);
const registry = newRegistry("api");
certificateExpiry(registry, { LIMITER_TLS_CLIENT_CERT: cfg.limiterTls?.cert, LIMITER_TLS_CA: cfg.limiterTls?.ca });
const server = serveApi(deps, cfg.host, cfg.port, { metrics: apiMetrics(registry), site });
const metricsServer = serveMetrics(registry, cfg.metricsHost, cfg.metricsPort, log);
log.info("listening", { url: `http://${cfg.host}:${server.port}`, limiter: cfg.limiterUrl });

// Stop accepting; the requests under way are answered, then the threads go.
exitGracefully(log, async () => {
  await server.stop();
  metricsServer.stop();
  await validation.close();
});
