import type { Server } from "bun";
import { ConnectError } from "@connectrpc/connect";
import { Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import {
  type Email,
  type Lane,
  type MessageInfo,
  MessageStatus,
  SendOutcome,
  type SendResponse,
} from "../gen/mailcore/limiter/v1/mail_pb";
import { type Admission, type AdmitCall, RecordsTimedOut } from "../limiterclient/client";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import type { ApiMetrics } from "../metrics/metrics";
import { laneName } from "../mail/policy";
import { isWellFormed } from "../token/token";
import { findRoute, templatePattern } from "../web/routes";
import { IDEMPOTENCY_CONFLICT_HEADER } from "../wire/metadata";
import { type AudienceCalls, audienceRoutes, createTagHandler } from "./audience";
import { type AutomationCalls, campaignRoutes } from "./campaigns";
import { workflowRoutes } from "./workflows";
import { clientIp } from "../clientip/clientip";
import { MAX_BODY_BYTES } from "../limits/limits";
import { apiContracts } from "./contract";
import { InvalidField, type SendInput } from "./emails";
import { rateLimitHeaders } from "./headers";
import { observed } from "./observe";
import { error, getOnly, type Headers_, invalid, iso, json, methodNotAllowed, readJson, type Route } from "./respond";
import { type WebhookCalls, webhookRoutes } from "./webhooks";

export const DOCS_PATH = "/docs/rate-limits";
export const HEALTH_PATH = "/healthz";
export const READY_PATH = "/readyz";
const TAGS_PATH = "/api/v1/tags";
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const BEARER = /^Bearer +(\S+) *$/i;

/** What the front needs from the daemon; every call fails closed by rejecting. */
export interface ApiDeps {
  admit(call: AdmitCall): Promise<Admission>;
  /** Rejects with NotQueued when the daemon is certain it queued nothing; any other rejection leaves it open. */
  send(
    req: { orgId: string; lane: Lane; email: Email; idempotencyKey: string; bodyHash: string },
    requestId: string,
  ): Promise<SendResponse>;
  /** undefined when the organization has no such message. */
  getMessage(orgId: string, messageId: string): Promise<MessageInfo | undefined>;
  webhooks: WebhookCalls;
  ready(): Promise<boolean>;
  audience: AudienceCalls;
  automation: AutomationCalls;
  /** The deadline of a record-bound call (a batch of 1,000 writes takes longer than an admission). */
  audienceTimeoutMs: number;
  /** Validates a send body off the event loop (validation.ts); throws InvalidField. */
  validateSend(orgId: string, body: unknown): Promise<SendInput>;
  trustProxy: readonly string[];
  /** Where the 429 body's docs link points; default: this API's own page. */
  docsUrl: string | undefined;
  log: Logger;
}

/** The daemon refused a send and is certain it queued nothing. */
export class NotQueued extends Error {}

/**
 * Pages served beside the API (the console, the API reference, their assets): a response for
 * the paths they own, undefined for every other path. They are not API requests: no admission.
 */
export type SiteHandler = (req: Request, url: URL, peerIp: string) => Promise<Response> | Response | undefined;

/** The daemon could not be asked; with the request's rate-limit headers when it was already admitted. */
const unavailable = (headers: Headers_ = {}) =>
  error(503, "LIMITER_UNAVAILABLE", "The rate limiter cannot be reached; the request was not served. Retry shortly.", {
    ...headers,
    "Retry-After": "1",
  });

/** A record-bound call that did not finish in time: the daemon commits by its deadline or not at all. */
const recordsLate = (headers: Headers_) =>
  error(
    503,
    "RECORDS_TIMEOUT",
    "The records did not answer in time; nothing was written. Retry shortly: with the same Idempotency-Key, a create is made once.",
    { ...headers, "Retry-After": "1" },
  );

const keyReused = (headers: Headers_) =>
  error(409, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body.", headers);

/**
 * A send the daemon did not confirm. Only a refusal the daemon vouches for says that nothing
 * was queued; a lost or late answer may hide a queued message, and the client is told how to
 * retry without sending it twice.
 */
function sendUnconfirmed(err: unknown, headers: Headers_): Response {
  const message =
    err instanceof NotQueued
      ? "The rate limiter did not take the email in time; nothing was queued. Retry shortly."
      : "The rate limiter did not confirm the email; it may or may not have been queued. Retry with the same Idempotency-Key, which never queues an email twice.";
  return error(503, "LIMITER_UNAVAILABLE", message, { ...headers, "Retry-After": "1" });
}

const STATUS_NAMES: Record<number, string> = {
  [MessageStatus.QUEUED]: "queued",
  [MessageStatus.SENDING]: "sending",
  [MessageStatus.DELIVERED]: "delivered",
  [MessageStatus.DEFERRED]: "deferred",
  [MessageStatus.BOUNCED]: "bounced",
  [MessageStatus.FAILED]: "failed",
};

function messageJson(m: MessageInfo) {
  return {
    id: m.id,
    lane: laneName(m.lane),
    status: STATUS_NAMES[m.status],
    from: m.from,
    to: m.to,
    subject: m.subject,
    attempts: m.attempts,
    createdAt: iso(m.createdAtMs),
    updatedAt: iso(m.updatedAtMs),
    events: m.events.map((e) => ({ status: STATUS_NAMES[e.status], at: iso(e.atMs), detail: e.detail })),
  };
}

/** The HTTP front: admission through the daemon, then the route. */
export function apiHandler(deps: ApiDeps, site?: SiteHandler, metrics?: ApiMetrics) {
  const admissionFailing = new FailureEpisode(deps.log, "admission");
  const sendFailing = new FailureEpisode(deps.log, "send");

  const table: [string, Route][] = [
    [
      TAGS_PATH,
      {
        GET: async ({ admission, headers }) =>
          json(200, { data: admission.tags.map((t) => ({ name: t.name, subscribers: t.subscribers })) }, headers),
        POST: createTagHandler(deps.audience, deps.audienceTimeoutMs),
      },
    ],
    [
      "/api/v1/emails",
      {
        POST: async ({ req, requestId, admission, headers, checkBody }) => {
          const key = req.headers.get("idempotency-key");
          const body = await readJson(req, headers);
          if (body instanceof Response) return body;
          let input: SendInput;
          try {
            checkBody(body);
            input = await deps.validateSend(admission.orgId, body);
          } catch (err) {
            if (!(err instanceof InvalidField)) throw err;
            return invalid(err.field, err.message, headers);
          }
          // A client that went away (an SMTP front that gave up) gets nothing queued behind its back.
          if (req.signal.aborted)
            return error(499, "CLIENT_CLOSED", "The client closed the request; nothing was queued.", headers);
          let res: SendResponse;
          try {
            res = await deps.send(
              {
                orgId: admission.orgId,
                lane: input.lane,
                email: input.email,
                idempotencyKey: key ?? "",
                bodyHash: input.fingerprint,
              },
              requestId,
            );
            sendFailing.succeeded();
          } catch (err) {
            sendFailing.failed(err as Error);
            return sendUnconfirmed(err, headers);
          }
          const accepted = { id: res.messageId, status: "queued", lane: laneName(input.lane) };
          switch (res.outcome) {
            case SendOutcome.ACCEPTED:
              return json(202, accepted, headers);
            case SendOutcome.REPLAYED:
              return json(202, accepted, { ...headers, "Idempotent-Replayed": "true" });
            case SendOutcome.IDEMPOTENCY_CONFLICT:
              return keyReused(headers);
            case SendOutcome.DOMAIN_NOT_VERIFIED:
              return error(
                403,
                "DOMAIN_NOT_VERIFIED",
                `${input.email.fromAddress.split("@").pop()} is not a verified sending domain of this organization.`,
                headers,
              );
            case SendOutcome.RECIPIENT_LIMITED:
              return json(
                429,
                { code: "RECIPIENT_RATE_LIMITED", message: "This recipient is temporarily rate limited." },
                { ...headers, "Retry-After": String(res.retryAfterSeconds) },
              );
            default:
              throw new Error(`unknown send outcome ${res.outcome}`);
          }
        },
      },
    ],
    [
      "/api/v1/emails/{id}",
      {
        GET: async ({ admission, headers, params }) => {
          const message = await deps.getMessage(admission.orgId, params[0]!);
          if (!message) return error(404, "NOT_FOUND", `No email ${params[0]} in this organization.`, headers);
          return json(200, messageJson(message), headers);
        },
      },
    ],
    ...audienceRoutes(deps.audience, deps.audienceTimeoutMs),
    ...webhookRoutes(deps.webhooks),
    ...campaignRoutes(deps.automation, deps.audienceTimeoutMs),
    ...workflowRoutes(deps.automation, deps.audienceTimeoutMs),
  ];
  const contracts = apiContracts();
  for (const [template, route] of table)
    for (const method of Object.keys(route))
      if (!contracts.has(`${method} ${template}`))
        throw new Error(`${method} ${template} is not in the OpenAPI document`);
  const routes = table.map(([template, route]) => [templatePattern(template), { template, route }] as const);

  async function handle(req: Request, peerIp: string, requestId: string): Promise<Response> {
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      // Bun builds req.url from the Host header; a malformed one ("[::1") is the client's error.
      return error(400, "INVALID_HOST", "The Host header is not a valid host[:port].");
    }
    const path = url.pathname;
    if (path === HEALTH_PATH) return getOnly(req, path, () => json(200, { status: "ok" }));
    const page = site?.(req, url, peerIp);
    if (page) return page;
    if (path === READY_PATH) {
      return getOnly(req, path, async () =>
        (await deps.ready().catch(() => false)) ? json(200, { status: "ready" }) : unavailable(),
      );
    }

    const authorization = req.headers.get("authorization");
    const bearer = authorization === null ? null : BEARER.exec(authorization);
    const token = bearer && isWellFormed(bearer[1]!) ? bearer[1]! : "";
    let admission: Admission;
    try {
      admission = await deps.admit({
        token,
        clientIp: clientIp(peerIp, req.headers.get("x-forwarded-for"), deps.trustProxy),
        withTags: (req.method === "GET" || req.method === "HEAD") && path === TAGS_PATH,
      });
      admissionFailing.succeeded();
    } catch (err) {
      admissionFailing.failed(err as Error); // every request is refused (503) meanwhile
      metrics?.admissionsUnavailable.inc();
      return unavailable();
    }
    const headers: Headers_ = { ...rateLimitHeaders(admission), "X-Request-Id": requestId };

    switch (admission.verdict) {
      case Verdict.ALLOWED:
        break;
      case Verdict.ORG_LIMITED:
      case Verdict.IP_LIMITED:
        return json(
          429,
          { message: "Too many requests", docs: deps.docsUrl ?? `${url.origin}${DOCS_PATH}` },
          { ...headers, "Retry-After": String(admission.retryAfterSeconds) },
        );
      case Verdict.UNAUTHENTICATED: {
        const challenge = { ...headers, "WWW-Authenticate": 'Bearer realm="api"' };
        if (authorization === null)
          return error(401, "MISSING_TOKEN", "Send your API token as Authorization: Bearer <token>.", challenge);
        if (bearer === null)
          return error(401, "INVALID_AUTHORIZATION", "The Authorization header must be: Bearer <token>.", challenge);
        return error(401, "INVALID_TOKEN", "The API token is not valid: it is unknown or was revoked.", challenge);
      }
      default:
        deps.log.error("unknown verdict from the limiter", { verdict: admission.verdict });
        return unavailable();
    }

    const found = findRoute(routes, path);
    if (!found) return error(404, "NOT_FOUND", `No such endpoint: ${req.method} ${path}`, headers);
    const {
      route: { template, route },
      params,
    } = found;
    // HEAD is GET's answer: Bun sends its headers without the body.
    const method = req.method === "HEAD" ? "GET" : req.method;
    const handler = route[method];
    if (!handler) return methodNotAllowed(req, path, Object.keys(route), headers);
    const contract = contracts.get(`${method} ${template}`)!;
    try {
      contract.parameters(params, url.searchParams);
    } catch (err) {
      if (!(err instanceof InvalidField)) throw err;
      return invalid(err.field, err.message, headers);
    }
    const key = req.method === "POST" ? req.headers.get("idempotency-key") : null;
    if (key !== null && !IDEMPOTENCY_KEY.test(key))
      return error(
        400,
        "INVALID_IDEMPOTENCY_KEY",
        "Idempotency-Key must be 1 to 255 printable ASCII characters.",
        headers,
      );
    try {
      return await handler({ req, requestId, admission, headers, params, checkBody: contract.body });
    } catch (err) {
      if (err instanceof ConnectError && err.metadata.get(IDEMPOTENCY_CONFLICT_HEADER) === "1")
        return keyReused(headers);
      deps.log.warn("daemon call failed", { path, error: (err as Error).message });
      if (err instanceof RecordsTimedOut) return recordsLate(headers);
      return unavailable(headers);
    }
  }
  // The admitted routes: for the test that holds them and the OpenAPI document to each other, and the metrics' route labels.
  return Object.assign(handle, {
    routes: table.map(([template, route], i) => ({ template, pattern: routes[i]![0], methods: Object.keys(route) })),
  });
}

/** What a serving API process adds to the handler: its metrics, and the pages beside the API. */
export interface ServeOptions {
  metrics?: ApiMetrics;
  site?: SiteHandler;
}

export function serveApi(deps: ApiDeps, host: string, port: number, o: ServeOptions = {}): Server<undefined> {
  const handle = observed(apiHandler(deps, o.site, o.metrics), o.metrics);
  return Bun.serve({
    hostname: host,
    port,
    // Larger bodies are cut off by Bun; up to twice the limit they get a clean 413 from readJson.
    maxRequestBodySize: 2 * MAX_BODY_BYTES,
    fetch(req, server) {
      return handle(req, server.requestIP(req)?.address ?? "0.0.0.0");
    },
    error(err) {
      deps.log.error("unhandled", { error: err.message });
      return error(500, "INTERNAL", "Internal error.");
    },
  });
}
