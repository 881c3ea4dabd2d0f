import type { Server } from "bun";
import { type AdmitResponse, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { Logger } from "../log/log";
import { isWellFormed } from "../token/token";
import { clientIp } from "./clientip";
import { rateLimitDocsPage } from "./docs";
import { rateLimitHeaders } from "./headers";

export const DOCS_PATH = "/docs/rate-limits";
/** Bodies above this are refused before they are read (the send endpoint's 1 MB plus framing). */
export const MAX_BODY_BYTES = 2 * 1024 * 1024;
const BEARER = /^Bearer +(\S+) *$/i;

export interface AdmitCall {
  token: string;
  clientIp: string;
}

/** What the front needs from the daemon; every call fails closed by rejecting. */
export interface ApiDeps {
  admit(call: AdmitCall): Promise<AdmitResponse>;
  listTags(orgId: string): Promise<string[]>;
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

const unavailable = () =>
  error(503, "LIMITER_UNAVAILABLE", "The rate limiter cannot be reached; the request was not served. Retry shortly.", { "Retry-After": "1" });

/** An admitted request of an organization, as the route handlers see it. */
interface Admitted {
  req: Request;
  orgId: string;
  headers: Headers_;
}

type Route = Partial<Record<string, (a: Admitted) => Promise<Response>>>;

/** The HTTP front: admission through the daemon, then the route. */
export function apiHandler(deps: ApiDeps) {
  const docsPage = rateLimitDocsPage();

  const routes: Record<string, Route> = {
    "/api/v1/tags": {
      GET: async ({ orgId, headers }) => {
        const tags = await deps.listTags(orgId);
        return json(200, { data: tags.map((name) => ({ name })) }, headers);
      },
    },
  };

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
      admission = await deps.admit({ token, clientIp: clientIp(peerIp, req.headers.get("x-forwarded-for"), deps.trustProxy) });
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

    const route = routes[path];
    if (!route) return error(404, "NOT_FOUND", `No such endpoint: ${req.method} ${path}`, headers);
    const handler = route[req.method];
    if (!handler) {
      return error(405, "METHOD_NOT_ALLOWED", `${path} does not accept ${req.method}.`, { ...headers, Allow: Object.keys(route).join(", ") });
    }
    try {
      return await handler({ req, orgId: admission.orgId, headers });
    } catch (err) {
      deps.log.warn("daemon call failed", { path, error: (err as Error).message });
      return unavailable();
    }
  };
}

export function serveApi(deps: ApiDeps, host: string, port: number): Server<undefined> {
  const handle = apiHandler(deps);
  return Bun.serve({
    hostname: host,
    port,
    maxRequestBodySize: MAX_BODY_BYTES,
    fetch(req, server) {
      return handle(req, server.requestIP(req)?.address ?? "0.0.0.0");
    },
    error(err) {
      deps.log.error("unhandled", { error: err.message });
      return error(500, "INTERNAL", "Internal error.");
    },
  });
}
