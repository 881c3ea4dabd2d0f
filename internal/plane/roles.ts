// Which role may call each of limiterd's RPCs, and where the organization it acts for comes
// from: one role per RPC, decided per RPC (a service may serve several roles). The API front
// admits, sends and serves the console; the SMTP front only checks tokens; the workers lease,
// ack and deliver webhooks; the operator (cmd/admin) makes organizations, plans, tokens, domains
// and console users and reads the lanes. A method missing here is refused to everyone, and the
// table test fails for it.
import { Code, ConnectError } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { Health } from "../gen/grpc/health/v1/health_pb";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import { DestinationService } from "../gen/mailcore/limiter/v1/destinations_pb";
import { DomainService } from "../gen/mailcore/limiter/v1/domains_pb";
import { FeedbackService, TrackingService } from "../gen/mailcore/limiter/v1/feedback_pb";
import { DirectoryService, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryService, LaneService, MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { SendBatchService } from "../gen/mailcore/limiter/v1/send_batch_pb";
import { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { WebhookDeliveryService, WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Logger } from "../log/log";
import type { Peer, Role } from "./tls";

/**
 * Where an RPC's organization comes from, decided for every RPC:
 * - ticket: the admission ticket the daemon signed, sent in the call's metadata; the request
 *   has no organization field, and a call without a valid ticket is refused;
 * - tickets: each item of the request carries the admission ticket of its own organization (the
 *   API's sends, coalesced: one call for many organizations), checked item by item; an item
 *   without a valid ticket is refused, the others are served;
 * - session: the console session token in the request, which the daemon looks up;
 * - secret: a secret in the request that names its organization (an API token, an unsubscribe
 *   link's token);
 * - operator: the admin role names the organization (its slug) in the request;
 * - none: the RPC acts for no one organization (admission, health, the lanes, the workers'
 *   leases and webhook claims, each bound to what the daemon handed out).
 */
export type Tenancy = "ticket" | "tickets" | "session" | "secret" | "operator" | "none";

/** Who may call an RPC, and where its organization comes from. */
export interface Access {
  role: Role;
  tenancy: Tenancy;
}

type Grant = [Role, Tenancy];

/** The access of every method of one service, by its local name; the type makes every method required. */
function service<S extends DescService>(s: S, grants: { [M in keyof S["method"]]: Grant }): [string, Access][] {
  return Object.entries(grants as Record<string, Grant>).map(([m, [role, tenancy]]) => [
    `/${s.typeName}/${s.method[m]!.name}`,
    { role, tenancy },
  ]);
}

const TICKET: Grant = ["front", "ticket"];
const SESSION: Grant = ["front", "session"];
const OPERATOR: Grant = ["admin", "operator"];

/** RPC path (/package.Service/Method) -> its one role and its tenancy. */
export const RPC_ACCESS: ReadonlyMap<string, Access> = new Map([
  // The admission answers the tickets.
  ...service(LimiterService, { admit: ["front", "secret"], admitBatch: ["front", "secret"] }),
  ...service(DirectoryService, {
    createOrganization: OPERATOR,
    provisionOrganizations: OPERATOR,
    setPlan: OPERATOR,
    getOrganization: OPERATOR,
    createToken: OPERATOR,
    // The token names its organization.
    revokeToken: ["admin", "secret"],
    addDomain: OPERATOR,
    // SMTP AUTH: the SMTP front's only RPC.
    verifyToken: ["smtp", "secret"],
    listTags: TICKET,
  }),
  // The API's readiness check (GET /readyz) asks it.
  ...service(Health, { check: ["front", "none"], watch: ["front", "none"] }),
  ...service(MailService, { send: TICKET, getMessage: TICKET, listMessages: TICKET, getMessageStats: TICKET }),
  ...service(SendBatchService, { sendBatch: ["front", "tickets"] }),
  ...service(DomainService, {
    createDomain: TICKET,
    listSendingDomains: TICKET,
    getDomain: TICKET,
    checkDomain: TICKET,
    rotateDkimKey: TICKET,
    deleteDomain: TICKET,
  }),
  // A lease's message carries its organization; an ack names a lease the daemon handed out.
  ...service(DeliveryService, { lease: ["worker", "none"], ack: ["worker", "none"] }),
  ...service(LaneService, { getLanes: ["admin", "none"], listReleases: ["admin", "none"] }),
  // A worker's destinations are its own; the admin CLI reads every worker's.
  ...service(DestinationService, { reportDestinations: ["worker", "none"], listDestinations: ["admin", "none"] }),
  ...service(ConsoleService, {
    createUser: OPERATOR,
    signIn: ["front", "secret"],
    signOut: SESSION,
    getSession: SESSION,
    listApiTokens: SESSION,
    createApiToken: SESSION,
    revokeApiToken: SESSION,
    listDomains: SESSION,
    addSendingDomain: SESSION,
    verifyDomain: SESSION,
    getUsage: SESSION,
  }),
  ...service(WebhookService, {
    createWebhook: TICKET,
    listWebhooks: TICKET,
    deleteWebhook: TICKET,
    listWebhookDeliveries: TICKET,
    testWebhook: TICKET,
    retryWebhookDelivery: TICKET,
  }),
  ...service(WebhookDeliveryService, {
    claimWebhookDeliveries: ["worker", "none"],
    reportWebhookAttempts: ["worker", "none"],
  }),
  ...service(AudienceService, {
    upsertSubscribers: TICKET,
    updateSubscriber: TICKET,
    getSubscriber: TICKET,
    deleteSubscriber: TICKET,
    listSubscribers: TICKET,
    listSubscriberEvents: TICKET,
    createTag: TICKET,
    deleteTag: TICKET,
  }),
  ...service(AutomationService, {
    createCampaign: TICKET,
    getCampaign: TICKET,
    listCampaigns: TICKET,
    sendCampaign: TICKET,
    cancelCampaign: TICKET,
    // The link's token names the subscriber and its organization.
    unsubscribe: ["front", "secret"],
    createWorkflow: TICKET,
    getWorkflow: TICKET,
    listWorkflows: TICKET,
    updateWorkflow: TICKET,
    deleteWorkflow: TICKET,
    listWorkflowRuns: TICKET,
    rotateWorkflowSecret: TICKET,
  }),
  ...service(SuppressionService, { listSuppressions: TICKET, addSuppression: TICKET, deleteSuppression: TICKET }),
  // The inbound MX: a return path carries the daemon's HMAC over its message, which names the
  // organization; nothing else in a report is believed without it.
  ...service(FeedbackService, {
    checkRecipient: ["inbound", "secret"],
    applyReport: ["inbound", "secret"],
    resumeBulk: OPERATOR,
  }),
  // A tracking URL's signed token names its message (and so its organization).
  ...service(TrackingService, { recordHit: ["front", "secret"] }),
]);

/** RPC path -> the one role allowed to call it. */
export const RPC_ROLES: ReadonlyMap<string, Role> = new Map([...RPC_ACCESS].map(([path, a]) => [path, a.role]));

/** The RPCs whose organization is the admission ticket's. */
export const TICKET_RPCS: ReadonlySet<string> = new Set(
  [...RPC_ACCESS].filter(([, a]) => a.tenancy === "ticket").map(([path]) => path),
);

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
