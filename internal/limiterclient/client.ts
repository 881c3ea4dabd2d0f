import type { DescService } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { Health } from "../gen/grpc/health/v1/health_pb";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { FeedbackService, TrackingService } from "../gen/mailcore/limiter/v1/feedback_pb";
import { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { DomainService } from "../gen/mailcore/limiter/v1/domains_pb";
import { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import { DirectoryService, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryService, LaneService, MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { WebhookDeliveryService, WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { ClientCredential } from "../plane/secret";
import { DEADLINE_HEADER, RECORDS_COMMIT_MARGIN_MS } from "../wire/metadata";
import type { Admission, AdmitCall } from "../wire/admit";
import { admitBatchCaller } from "./admit";
import { type SendBatchCaller, sendBatchCaller } from "./send_batch";
import { limiterSession, limiterTransport } from "./transport";

export type { Admission, AdmitCall };

/** Every client of the daemon, for the dev stack, the benches and the tests (a process makes only its own: daemonConnection). */
export interface LimiterClients {
  /** LimiterService.AdmitBatch on the hot path, without Connect's client, on a connection of its own (see admit.ts). */
  admitBatch(calls: readonly AdmitCall[], timeoutMs: number): Promise<Admission[]>;
  /** SendBatchService.SendBatch, the API's sends, the same way on a connection of its own (send_batch.ts). */
  sendBatch: SendBatchCaller;
  limiter: Client<typeof LimiterService>;
  directory: Client<typeof DirectoryService>;
  health: Client<typeof Health>;
  mail: Client<typeof MailService>;
  delivery: Client<typeof DeliveryService>;
  lanes: Client<typeof LaneService>;
  console: Client<typeof ConsoleService>;
  webhooks: Client<typeof WebhookService>;
  webhookDelivery: Client<typeof WebhookDeliveryService>;
  audience: Client<typeof AudienceService>;
  automation: Client<typeof AutomationService>;
  domains: Client<typeof DomainService>;
  suppressions: Client<typeof SuppressionService>;
  feedback: Client<typeof FeedbackService>;
  tracking: Client<typeof TrackingService>;
}

/** A record-bound call that did not finish by its deadline: limiterd wrote nothing of it. */
export class RecordsTimedOut extends ConnectError {
  // ConnectError's instanceof takes any ConnectError (to work across copies of the library),
  // and a subclass inherits it: without the ordinary instanceof here, every failed call would
  // read as a records timeout.
  static override [Symbol.hasInstance](value: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(RecordsTimedOut, value);
  }
}

/**
 * A record-bound call tells limiterd by when to have committed or rolled back its records:
 * RECORDS_COMMIT_MARGIN_MS before the call's own timeout (which Connect's gRPC client sends as
 * grpc-timeout in milliseconds), so a call that times out here wrote nothing there.
 */
const recordsDeadline: Interceptor = (next) => async (req) => {
  const timeout = /^(\d+)m$/.exec(req.header.get("grpc-timeout") ?? "");
  if (!timeout) return next(req);
  req.header.set(DEADLINE_HEADER, String(Date.now() + Number(timeout[1]) - RECORDS_COMMIT_MARGIN_MS));
  try {
    return await next(req);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.DeadlineExceeded)
      throw new RecordsTimedOut(err.rawMessage, Code.DeadlineExceeded);
    throw err;
  }
};

/** The services whose calls write records: each call carries the records deadline (recordsDeadline). */
const RECORD_BOUND: ReadonlySet<DescService> = new Set([WebhookService, AudienceService, AutomationService]);

/** Clients of the daemon's services over one connection, made one by one: a process makes those it calls. */
export interface DaemonConnection {
  /** A client of one service; a record-bound service's calls carry their records deadline. */
  client<S extends DescService>(service: S): Client<S>;
}

/**
 * One HTTP/2 connection to the daemon (transport.ts); with a certificate, baseUrl is https://
 * and the connection is mutual TLS, otherwise each call carries the plane secret. It opens at
 * the first call.
 */
export function daemonConnection(baseUrl: string, cred: ClientCredential): DaemonConnection {
  const session = limiterSession(baseUrl, cred);
  const transport = limiterTransport(baseUrl, cred, { session });
  const recordsTransport = limiterTransport(baseUrl, cred, { session, interceptors: [recordsDeadline] });
  return {
    client: (service) => createClient(service, RECORD_BOUND.has(service) ? recordsTransport : transport),
  };
}

/** Every client of the daemon over one connection (daemonConnection); AdmitBatch and SendBatch, the hot paths, over connections of their own (admit.ts, send_batch.ts). */
export function limiterClients(baseUrl: string, cred: ClientCredential): LimiterClients {
  const daemon = daemonConnection(baseUrl, cred);
  return {
    admitBatch: admitBatchCaller(baseUrl, cred),
    sendBatch: sendBatchCaller(baseUrl, cred),
    limiter: daemon.client(LimiterService),
    directory: daemon.client(DirectoryService),
    health: daemon.client(Health),
    mail: daemon.client(MailService),
    delivery: daemon.client(DeliveryService),
    lanes: daemon.client(LaneService),
    console: daemon.client(ConsoleService),
    webhooks: daemon.client(WebhookService),
    webhookDelivery: daemon.client(WebhookDeliveryService),
    audience: daemon.client(AudienceService),
    automation: daemon.client(AutomationService),
    domains: daemon.client(DomainService),
    suppressions: daemon.client(SuppressionService),
    feedback: daemon.client(FeedbackService),
    tracking: daemon.client(TrackingService),
  };
}
