import type { Server } from "bun";
import { type AdmitResponse, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type Email, type Lane, type MessageInfo, MessageStatus, SendOutcome, type SendResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Logger } from "../log/log";
import { laneName } from "../mail/policy";
import { isWellFormed } from "../token/token";
import { clientIp } from "./clientip";
import { rateLimitDocsPage } from "./docs";
import { InvalidField, parseSendRequest } from "./emails";
import { rateLimitHeaders } from "./headers";

export const DOCS_PATH = "/docs/rate-limits";
const TAGS_PATH = "/api/v1/tags";
/** The largest request body the API accepts (spec 8.3: 1 MB messages). */
export const MAX_BODY_BYTES = 1024 * 1024;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const BEARER = /^Bearer +(\S+) *$/i;

export interface AdmitCall {
  token: string;
  clientIp: string;
  /** Ask for the organization's tags with the admission (GET /api/v1/tags). */
  withTags: boolean;
}

/** What the front needs from the daemon; every call fails closed by rejecting. */
export interface ApiDeps {
  admit(call: AdmitCall): Promise<AdmitResponse>;
  send(req: { orgId: string; lane: Lane; email: Email; idempotencyKey: string; bodyHash: string }): Promise<SendResponse>;
  /** undefined when the organization has no such message. */
  getMessage(orgId: string, messageId: string): Promise<MessageInfo | undefined>;
  ready(): Promise<boolean>;
  trustProxy: readonly string[];
  /** Where the 429 body's docs link points; default: this API's own page. */
  docsUrl: string | undefined;
  log: Logger;
}

type Headers_ = Record<string, string>;

function json(status: number, body: unknown, headers: Headers_ = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...headers, "Content-Type": "application/json" } });
}

function error(status: number, code: string, message: string, headers: Headers_ = {}): Response {
  return json(status, { code, message }, headers);
}

/** The daemon could not be asked; with the request's rate-limit headers when it was already admitted. */
const unavailable = (headers: Headers_ = {}) =>
  error(503, "LIMITER_UNAVAILABLE", "The rate limiter cannot be reached; the request was not served. Retry shortly.", { ...headers, "Retry-After": "1" });

/** An admitted request of an organization, as the route handlers see it. */
interface Admitted {
  req: Request;
  admission: AdmitResponse;
  headers: Headers_;
  /** The path's captured parts. */
  params: string[];
}

type Route = Partial<Record<string, (a: Admitted) => Promise<Response>>>;

const STATUS_NAMES: Record<number, string> = {
  [MessageStatus.QUEUED]: "queued",
  [MessageStatus.SENDING]: "sending",
  [MessageStatus.DELIVERED]: "delivered",
  [MessageStatus.DEFERRED]: "deferred",
  [MessageStatus.BOUNCED]: "bounced",
  [MessageStatus.FAILED]: "failed",
};

const iso = (ms: bigint) => new Date(Number(ms)).toISOString();

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

/** Reads a JSON body of at most MAX_BODY_BYTES; a Response when it cannot. */
async function readJson(req: Request, headers: Headers_): Promise<unknown | Response> {
  const type = req.headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    return error(415, "UNSUPPORTED_MEDIA_TYPE", "Send the body as Content-Type: application/json.", headers);
  }
  const tooLarge = () => error(413, "PAYLOAD_TOO_LARGE", `The body is larger than ${MAX_BODY_BYTES} bytes.`, headers);
  if (Number(req.headers.get("content-length") ?? 0) > MAX_BODY_BYTES) return tooLarge();
  const body = await req.arrayBuffer();
  if (body.byteLength > MAX_BODY_BYTES) return tooLarge();
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    return error(400, "INVALID_JSON", "The body is not valid UTF-8 JSON.", headers);
  }
}

/** The HTTP front: admission through the daemon, then the route. */
export function apiHandler(deps: ApiDeps) {
  const docsPage = rateLimitDocsPage();

  const routes: [RegExp, Route][] = [
    [
      new RegExp(`^${TAGS_PATH}$`),
      {
        GET: async ({ admission, headers }) => json(200, { data: admission.tags.map((t) => ({ name: t.name })) }, headers),
      },
    ],
    [
      /^\/api\/v1\/emails$/,
      {
        POST: async ({ req, admission, headers }) => {
          const key = req.headers.get("idempotency-key");
          if (key !== null && !IDEMPOTENCY_KEY.test(key)) {
            return error(400, "INVALID_IDEMPOTENCY_KEY", "Idempotency-Key must be 1 to 255 printable ASCII characters.", headers);
          }
          const body = await readJson(req, headers);
          if (body instanceof Response) return body;
          let input: ReturnType<typeof parseSendRequest>;
          try {
            input = parseSendRequest(body);
          } catch (err) {
            if (!(err instanceof InvalidField)) throw err;
            return json(422, { code: "VALIDATION_FAILED", message: err.message, field: err.field }, headers);
          }
          const res = await deps.send({ orgId: admission.orgId, lane: input.lane, email: input.email, idempotencyKey: key ?? "", bodyHash: input.fingerprint });
          const accepted = { id: res.messageId, status: "queued", lane: laneName(input.lane) };
          switch (res.outcome) {
            case SendOutcome.ACCEPTED:
              return json(202, accepted, headers);
            case SendOutcome.REPLAYED:
              return json(202, accepted, { ...headers, "Idempotent-Replayed": "true" });
            case SendOutcome.IDEMPOTENCY_CONFLICT:
              return error(409, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body.", headers);
            case SendOutcome.DOMAIN_NOT_VERIFIED:
              return error(403, "DOMAIN_NOT_VERIFIED", `${input.email.fromAddress.split("@").pop()} is not a verified sending domain of this organization.`, headers);
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
      /^\/api\/v1\/emails\/([^/]+)$/,
      {
        GET: async ({ admission, headers, params }) => {
          const message = /^msg_[0-9a-f]{24}$/.test(params[0]!) ? await deps.getMessage(admission.orgId, params[0]!) : undefined;
          if (!message) return error(404, "NOT_FOUND", `No email ${params[0]} in this organization.`, headers);
          return json(200, messageJson(message), headers);
        },
      },
    ],
  ];

  return async function handle(req: Request, peerIp: string): Promise<Response> {
    const url = new URL(req.url);
    const path = url.pathname;
    if (path === DOCS_PATH) return new Response(docsPage, { headers: { "Content-Type": "text/html; charset=utf-8" } });
    if (path === "/healthz") return json(200, { status: "ok" });
    if (path === "/readyz") {
      return (await deps.ready().catch(() => false)) ? json(200, { status: "ready" }) : unavailable();
    }

    const authorization = req.headers.get("authorization");
    const bearer = authorization === null ? null : BEARER.exec(authorization);
    const token = bearer && isWellFormed(bearer[1]!) ? bearer[1]! : "";
    let admission: AdmitResponse;
    try {
      admission = await deps.admit({
        token,
        clientIp: clientIp(peerIp, req.headers.get("x-forwarded-for"), deps.trustProxy),
        withTags: req.method === "GET" && path === TAGS_PATH,
      });
    } catch (err) {
      deps.log.warn("admission failed; refusing", { error: (err as Error).message });
      return unavailable();
    }
    const headers = rateLimitHeaders(admission);

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
        if (authorization === null) return error(401, "MISSING_TOKEN", "Send your API token as Authorization: Bearer <token>.", challenge);
        if (bearer === null) return error(401, "INVALID_AUTHORIZATION", "The Authorization header must be: Bearer <token>.", challenge);
        return error(401, "INVALID_TOKEN", "The API token is not valid: it is unknown or was revoked.", challenge);
      }
      default:
        deps.log.error("unknown verdict from the limiter", { verdict: admission.verdict });
        return unavailable();
    }

    let params: string[] = [];
    const route = routes.find(([pattern]) => {
      const m = pattern.exec(path);
      if (m) params = m.slice(1);
      return m !== null;
    })?.[1];
    if (!route) return error(404, "NOT_FOUND", `No such endpoint: ${req.method} ${path}`, headers);
    const handler = route[req.method];
    if (!handler) {
      return error(405, "METHOD_NOT_ALLOWED", `${path} does not accept ${req.method}.`, { ...headers, Allow: Object.keys(route).join(", ") });
    }
    try {
      return await handler({ req, admission, headers, params });
    } catch (err) {
      deps.log.warn("daemon call failed", { path, error: (err as Error).message });
      return unavailable(headers);
    }
  };
}

export function serveApi(deps: ApiDeps, host: string, port: number): Server<undefined> {
  const handle = apiHandler(deps);
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
