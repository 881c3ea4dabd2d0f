import { Code, ConnectError } from "@connectrpc/connect";
import { MicroBatcher } from "../batch/batcher";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import type { AdmitRequest, AdmitResponse } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { LimiterClients } from "../limiterclient/client";
import { MAX_BATCH } from "../limiter/service";
import type { Logger } from "../log/log";
import type { ApiDeps } from "./server";

/** The API's dependencies, each a call to the daemon with a deadline; admissions are micro-batched. */
export function daemonDeps(
  clients: LimiterClients,
  o: { timeoutMs: number; trustProxy: readonly string[]; docsUrl: string | undefined; log: Logger },
): ApiDeps {
  const { limiter, health, mail } = clients;
  const call = { timeoutMs: o.timeoutMs };
  const admissions = new MicroBatcher<Pick<AdmitRequest, "token" | "clientIp" | "withTags">, AdmitResponse>(
    async (requests) => (await limiter.admitBatch({ requests }, call)).responses,
    MAX_BATCH,
  );
  return {
    admit: (c) => admissions.submit(c),
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
    trustProxy: o.trustProxy,
    docsUrl: o.docsUrl,
    log: o.log,
  };
}
