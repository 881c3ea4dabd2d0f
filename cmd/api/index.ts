// api: the HTTP front. Every request is admitted by limiterd; nothing is served without it.
import { daemonDeps } from "../../internal/api/deps";
import { serveApi } from "../../internal/api/server";
import { apiConfig, loadOrExit } from "../../internal/config/config";
import { limiterClients } from "../../internal/limiterclient/client";
import { logger } from "../../internal/log/log";

const log = logger("api");
const cfg = loadOrExit("api", () => apiConfig(process.env));
const deps = daemonDeps(limiterClients(cfg.limiterUrl), { timeoutMs: cfg.limiterTimeoutMs, trustProxy: cfg.trustProxy, docsUrl: cfg.docsUrl, log });
const server = serveApi(deps, cfg.host, cfg.port);
log.info("listening", { url: `http://${cfg.host}:${server.port}`, limiter: cfg.limiterUrl });

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    log.info("stopping", { signal });
    await server.stop();
    process.exit(0);
  });
}
