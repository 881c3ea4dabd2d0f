import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "../gen/grpc/health/v1/health_pb";
import { DirectoryService, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryService, LaneService, MailService } from "../gen/mailcore/limiter/v1/mail_pb";

export interface LimiterClients {
  limiter: Client<typeof LimiterService>;
  directory: Client<typeof DirectoryService>;
  health: Client<typeof Health>;
  mail: Client<typeof MailService>;
  delivery: Client<typeof DeliveryService>;
  lanes: Client<typeof LaneService>;
}

/**
 * gRPC clients of the daemon over one HTTP/2 connection. The connection is pinged while
 * idle and re-established by the session manager after the daemon restarts.
 */
export function limiterClients(baseUrl: string): LimiterClients {
  const transport = createGrpcTransport({ baseUrl, pingIntervalMs: 5_000, pingTimeoutMs: 2_000, acceptCompression: [] });
  return {
    limiter: createClient(LimiterService, transport),
    directory: createClient(DirectoryService, transport),
    health: createClient(Health, transport),
    mail: createClient(MailService, transport),
    delivery: createClient(DeliveryService, transport),
    lanes: createClient(LaneService, transport),
  };
}
