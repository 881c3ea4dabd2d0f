import type { Client } from "@connectrpc/connect";
import type { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import type { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import type { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import type { MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import type { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import type { WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import type { Logger } from "../log/log";
import type { PageRequest } from "./request";

/** Sessions, API tokens, sending domains and usage: the daemon decides each, the console only shows it. */
export type ConsoleCalls = Pick<
  Client<typeof ConsoleService>,
  | "getSession"
  | "signIn"
  | "signOut"
  | "listApiTokens"
  | "createApiToken"
  | "revokeApiToken"
  | "listDomains"
  | "addSendingDomain"
  | "verifyDomain"
  | "getUsage"
>;

/**
 * The daemon's calls the console makes. Everything but the console's own service is asked for
 * the session's organization: the daemon's answer, never the request's.
 */
export interface ConsolePorts {
  console: ConsoleCalls;
  audience: Pick<Client<typeof AudienceService>, "listSubscribers" | "getSubscriber" | "listSubscriberEvents">;
  automation: Pick<
    Client<typeof AutomationService>,
    "listCampaigns" | "listWorkflows" | "getWorkflow" | "listWorkflowRuns"
  >;
  /** The activity log and the delivery figures. */
  mail: Pick<Client<typeof MailService>, "listMessages" | "getMessage" | "getMessageStats">;
  webhooks: Pick<
    Client<typeof WebhookService>,
    "listWebhooks" | "listWebhookDeliveries" | "testWebhook" | "retryWebhookDelivery"
  >;
  suppressions: Pick<Client<typeof SuppressionService>, "listSuppressions">;
}

export interface ConsoleOptions {
  /** The deadline of a call to the daemon. */
  timeoutMs: number;
  /** Peers whose X-Forwarded-For and X-Forwarded-Proto are believed. */
  trustProxy: readonly string[];
  log: Logger;
}

/** Sign-in hashes with argon2id and Verify asks DNS: both take longer than an admission. */
const SLOW_CALL_MS = 10_000;

/** What every page handler is given besides its request: the ports, the options of their calls, the log. */
export interface ConsoleContext {
  ports: ConsolePorts;
  call: { timeoutMs: number };
  /** A call that takes longer: a sign-in, a verification, a read of the audience's records. */
  slow: { timeoutMs: number };
  log: Logger;
}

export function consoleContext(ports: ConsolePorts, o: ConsoleOptions): ConsoleContext {
  return {
    ports,
    call: { timeoutMs: o.timeoutMs },
    slow: { timeoutMs: Math.max(o.timeoutMs, SLOW_CALL_MS) },
    log: o.log,
  };
}

/** One method of a console path: the request and the path's parameters, to the page. */
export type PageHandler = (cx: ConsoleContext, r: PageRequest, params: string[]) => Promise<Response>;
