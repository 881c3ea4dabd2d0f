// api: the HTTP front. Every request is admitted by limiterd; nothing is served without it.
import { Code, ConnectError } from "@connectrpc/connect";
import { serveApi } from "../../internal/api/server";
import { MicroBatcher } from "../../internal/batch/batcher";
import { apiConfig, loadOrExit } from "../../internal/config/config";
import { HealthCheckResponse_ServingStatus } from "../../internal/gen/grpc/health/v1/health_pb";
import type { AdmitRequest, AdmitResponse } from "../../internal/gen/mailcore/limiter/v1/limiter_pb";
import { limiterClients } from "../../internal/limiterclient/client";
import { MAX_BATCH } from "../../internal/limiter/service";
import { logger } from "../../internal/log/log";

const log = logger("api");
const cfg = loadOrExit("api", () => apiConfig(process.env));
const { limiter, directory, health, mail } = limiterClients(cfg.limiterUrl);
const call = { timeoutMs: cfg.limiterTimeoutMs };

const admissions = new MicroBatcher<Pick<AdmitRequest, "token" | "clientIp">, AdmitResponse>(
  async (requests) => (await limiter.admitBatch({ requests }, call)).responses,
  MAX_BATCH,
);

const server = serveApi(
  {
    admit: (c) => admissions.submit(c),
    listTags: async (orgId) => (await directory.listTags({ orgId }, call)).tags.map((t) => t.name),
    send: (req) => mail.send(req, call),
    getMessage: async (orgId, messageId) => {
      try {
        return (await mail.getMessage({ orgId, messageId }, call)).message;
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
        throw err;
      }
    },
    ready: async () => (await health.check({}, call)).status === HealthCheckResponse_ServingStatus.SERVING,
    trustProxy: cfg.trustProxy,
    docsUrl: cfg.docsUrl,
    log,
  },
  cfg.host,
  cfg.port,
);
log.info("listening", { url: `http://${cfg.host}:${server.port}`, limiter: cfg.limiterUrl });

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    log.info("stopping", { signal });
    await server.stop();
    process.exit(0);
  });
}
