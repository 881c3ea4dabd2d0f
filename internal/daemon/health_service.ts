import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import {
  type Health,
  type HealthCheckRequest,
  HealthCheckResponse_ServingStatus,
} from "../gen/grpc/health/v1/health_pb";
import { DirectoryService, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { StoreLifecycle } from "../hotstore/hotstore";

// grpc.health.v1 for the daemon's load balancers and probes.

/** The services a check may name (besides "", the whole daemon). */
const CHECKED = new Set(["", LimiterService.typeName, DirectoryService.typeName]);

export interface HealthDeps {
  lifecycle: Pick<StoreLifecycle, "ping">;
}

/** Health's methods, by name. */
export function healthHandlers(deps: HealthDeps): Partial<ServiceImpl<typeof Health>> {
  return { check: (req) => checkHealth(deps, req) };
}

/** Serving as long as the hot store answers: admission and sending need nothing else. */
export async function checkHealth(deps: HealthDeps, req: HealthCheckRequest) {
  if (!CHECKED.has(req.service)) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
  const serving = await deps.lifecycle.ping().then(
    () => true,
    () => false,
  );
  return {
    status: serving ? HealthCheckResponse_ServingStatus.SERVING : HealthCheckResponse_ServingStatus.NOT_SERVING,
  };
}
