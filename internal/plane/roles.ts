// Which role may call each of limiterd's RPCs: one role per RPC, decided per RPC (a service
// may serve several roles). The fronts (api, smtp) admit, send and serve the console; the
// workers lease, ack and deliver webhooks; the operator (cmd/admin) makes organizations,
// plans, tokens, domains and console users and reads the lanes. A method missing here is
// refused to everyone, and the table test fails for it.
import { Code, ConnectError } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { Health } from "../gen/grpc/health/v1/health_pb";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import { DestinationService } from "../gen/mailcore/limiter/v1/destinations_pb";
import { DirectoryService, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryService, LaneService, MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { WebhookDeliveryService, WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Logger } from "../log/log";
import type { Peer, Role } from "./tls";

/** The role of every method of one service, by its local name; the type makes every method required. */
function service<S extends DescService>(s: S, roles: { [M in keyof S["method"]]: Role }): [string, Role][] {
  return Object.entries(roles as Record<string, Role>).map(([m, role]) => [
    `/${s.typeName}/${s.method[m]!.name}`,
    role,
  ]);
}

/** RPC path (/package.Service/Method) -> the one role allowed to call it. */
export const RPC_ROLES: ReadonlyMap<string, Role> = new Map([
  ...service(LimiterService, { admit: "front", admitBatch: "front" }),
  ...service(DirectoryService, {
    createOrganization: "admin",
    provisionOrganizations: "admin",
    setPlan: "admin",
    getOrganization: "admin",
    createToken: "admin",
    revokeToken: "admin",
    addDomain: "admin",
    verifyToken: "front",
    listTags: "front",
  }),
  // The API's readiness check (GET /readyz) asks it.
  ...service(Health, { check: "front", watch: "front" }),
  ...service(MailService, { send: "front", getMessage: "front", listMessages: "front", getMessageStats: "front" }),
  ...service(DeliveryService, { lease: "worker", ack: "worker" }),
  ...service(LaneService, { getLanes: "admin", listReleases: "admin" }),
  ...service(DestinationService, { reportDestinations: "worker", listDestinations: "admin" }),
  ...service(ConsoleService, {
    createUser: "admin",
    signIn: "front",
    signOut: "front",
    getSession: "front",
    listApiTokens: "front",
    createApiToken: "front",
    revokeApiToken: "front",
    listDomains: "front",
    addSendingDomain: "front",
    verifyDomain: "front",
    getUsage: "front",
  }),
  ...service(WebhookService, {
    createWebhook: "front",
    listWebhooks: "front",
    deleteWebhook: "front",
    listWebhookDeliveries: "front",
    testWebhook: "front",
    retryWebhookDelivery: "front",
  }),
  ...service(WebhookDeliveryService, { claimWebhookDeliveries: "worker", reportWebhookAttempts: "worker" }),
  ...service(AudienceService, {
    upsertSubscribers: "front",
    updateSubscriber: "front",
    getSubscriber: "front",
    deleteSubscriber: "front",
    listSubscribers: "front",
    listSubscriberEvents: "front",
    createTag: "front",
    deleteTag: "front",
  }),
  ...service(AutomationService, {
    createCampaign: "front",
    getCampaign: "front",
    listCampaigns: "front",
    sendCampaign: "front",
    cancelCampaign: "front",
    unsubscribe: "front",
    createWorkflow: "front",
    getWorkflow: "front",
    listWorkflows: "front",
    updateWorkflow: "front",
    deleteWorkflow: "front",
    listWorkflowRuns: "front",
    rotateWorkflowSecret: "front",
  }),
]);

/** Decides whether a verified client may call an RPC: undefined when it may, else the error to answer. */
export type Authorize = (path: string, peer: Peer) => ConnectError | undefined;

/** Serves each RPC to the holders of its role only, and logs each refusal with the RPC and the certificate's subject. */
export function roleGate(log: Logger): Authorize {
  return (path, peer) => {
    const role = RPC_ROLES.get(path);
    if (role !== undefined && peer.roles.has(role)) return undefined;
    log.warn("refused an RPC: the client certificate does not name its role", {
      rpc: path,
      subject: peer.subject,
      roles: [...peer.roles].join(","),
      needs: role ?? "none (an RPC without a role)",
    });
    return new ConnectError(
      role === undefined ? `${path} is served to no role` : `${path} is served to the ${role} role only`,
      Code.PermissionDenied,
    );
  };
}
