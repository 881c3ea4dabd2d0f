import type { Server } from "bun";
import { ConnectError } from "@connectrpc/connect";
import { Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type Admission, RecordsTimedOut } from "../limiterclient/client";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import type { ApiMetrics } from "../metrics/metrics";
import { isWellFormed } from "../token/token";
import { findRoute } from "../web/routes";
import { IDEMPOTENCY_CONFLICT_HEADER } from "../wire/metadata";
import { clientIp } from "../clientip/clientip";
import { MAX_BODY_BYTES } from "../limits/limits";
import { apiContracts } from "./contract";
import { InvalidField } from "./invalid_field";
import { rateLimitHeaders } from "./ratelimit_headers";
import { observed } from "./observe";
import type { AdmissionPort, ApiPorts } from "./ports";
import {
  type Admitted,
  error,
  type Front,
  getOnly,
  type Headers_,
  invalid,
  json,
  methodNotAllowed,
  ticketed,
} from "./respond";
import { ROUTES, TAGS_PATH } from "./routes";
import { keyReused } from "./send";

// The HTTP front's dispatch: the paths outside the API, then each request's admission through
// the daemon, then its route (routes.ts) with the checks every route shares.

export const DOCS_PATH = "/docs/rate-limits";
export const HEALTH_PATH = "/healthz";
export const READY_PATH = "/readyz";
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const BEARER = /^Bearer +(\S+) *$/i;

/** How the front runs, apart from its ports. */
export interface ApiOptions {
  /** Peers whose X-Forwarded-For names the client. */
  trustProxy: readonly string[];
  /** Where the 429 body's docs link points; default: this API's own page. */
  docsUrl: string | undefined;
  /** The deadline of a record-bound call (a batch of 1,000 writes takes longer than an admission). */
  recordsTimeoutMs: number;
  log: Logger;
  metrics?: ApiMetrics;
  /** The pages served beside the API. */
  site?: SiteHandler;
}

/**
 * Pages served beside the API (the console, the API reference, their assets): a response for
 * the paths they own, undefined for every other path. They are not API requests: the pages that
 * ask the daemon anything (the console, unsubscribing) count against the client's IP limit
 * (ipGate); the static ones cost nothing to serve.
 */
export type SiteHandler = (req: Request, url: URL, peerIp: string) => Promise<Response> | Response | undefined;

/**
 * Counts a request without an API token against its client's IP limit (the API's 500 per
 * second, an IPv6 client by its network): undefined when allowed, else the seconds to wait;
 * rejects when the daemon cannot be asked.
 */
export type IpGate = (req: Request, peerIp: string) => Promise<number | undefined>;

/** The IP gate of a front: an admission without a token, for the client the request is attributed to. */
export function ipGate(admission: AdmissionPort, trustProxy: readonly string[]): IpGate {
  return async (req, peerIp) => {
    const a = await admission.admit({
      token: "",
      clientIp: clientIp(peerIp, req.headers.get("x-forwarded-for"), trustProxy),
      withTags: false,
    });
    return a.verdict === Verdict.IP_LIMITED ? a.retryAfterSeconds : undefined;
  };
}

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

/** The Authorization header as the admission reads it: the token when it is a well-formed bearer token, "" otherwise. */
export function bearerToken(authorization: string | null): { token: string; isBearer: boolean } {
  const bearer = authorization === null ? null : BEARER.exec(authorization);
  return { token: bearer && isWellFormed(bearer[1]!) ? bearer[1]! : "", isBearer: bearer !== null };
}

/** 429 for a request the IP limit refused. */
const tooManyFromAddress = (retryAfterSeconds: number, docsUrl: string) =>
  json(429, { message: "Too many requests", docs: docsUrl }, { "Retry-After": String(retryAfterSeconds) });

/** The answer to an admission that did not allow the request; undefined when it did. */
export function refusedAdmission(
  admission: Admission,
  authorization: string | null,
  headers: Headers_,
  /** Where the 429 body's docs link points (asked only for a 429). */
  docsUrl: () => string,
  log: Logger,
): Response | undefined {
  switch (admission.verdict) {
    case Verdict.ALLOWED:
      return undefined;
    case Verdict.ORG_LIMITED:
    case Verdict.IP_LIMITED:
      return json(
        429,
        { message: "Too many requests", docs: docsUrl() },
        { ...headers, "Retry-After": String(admission.retryAfterSeconds) },
      );
    case Verdict.UNAUTHENTICATED: {
      const challenge = { ...headers, "WWW-Authenticate": 'Bearer realm="api"' };
      if (authorization === null)
        return error(401, "MISSING_TOKEN", "Send your API token as Authorization: Bearer <token>.", challenge);
      if (!bearerToken(authorization).isBearer)
        return error(401, "INVALID_AUTHORIZATION", "The Authorization header must be: Bearer <token>.", challenge);
      return error(401, "INVALID_TOKEN", "The API token is not valid: it is unknown or was revoked.", challenge);
    }
    default:
      log.error("unknown verdict from the limiter", { verdict: admission.verdict });
      return unavailable();
  }
}

/** Every route of the table is an operation of the OpenAPI document, whose checks it runs; throws otherwise. */
function documentedContracts(): void {
  const contracts = apiContracts();
  for (const { template, methods } of ROUTES)
    for (const method of methods)
      if (!contracts.has(`${method} ${template}`))
        throw new Error(`${method} ${template} is not in the OpenAPI document`);
}

const MATCHED = ROUTES.map((r) => [r.pattern, r] as const);

/** An admitted request to its route: the path, the method, the parameters, the Idempotency-Key, then the handler. */
export async function serveRoute(
  front: Front,
  a: Omit<Admitted, "params" | "checkBody">,
  url: URL,
  log: Logger,
): Promise<Response> {
  const { req, headers } = a;
  const path = url.pathname;
  const found = findRoute(MATCHED, path);
  if (!found) return error(404, "NOT_FOUND", `No such endpoint: ${req.method} ${path}`, headers);
  const { template, route } = found.route;
  // HEAD is GET's answer: Bun sends its headers without the body.
  const method = req.method === "HEAD" ? "GET" : req.method;
  const handler = route[method];
  if (!handler) return methodNotAllowed(req, path, Object.keys(route), headers);
  const contract = apiContracts().get(`${method} ${template}`)!;
  try {
    contract.parameters(found.params, url.searchParams);
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
  // Every call the handler makes for the organization carries the admission's ticket.
  const admitted: Front = { ports: front.ports, records: ticketed(front.records, a.admission.ticket) };
  try {
    return await handler(admitted, { ...a, params: found.params, checkBody: contract.body });
  } catch (err) {
    if (err instanceof ConnectError && err.metadata.get(IDEMPOTENCY_CONFLICT_HEADER) === "1") return keyReused(headers);
    log.warn("daemon call failed", { path, error: (err as Error).message });
    if (err instanceof RecordsTimedOut) return recordsLate(headers);
    return unavailable(headers);
  }
}

/** The HTTP front: admission through the daemon, then the route. */
export function apiHandler(ports: ApiPorts, o: ApiOptions) {
  const admissionFailing = new FailureEpisode(o.log, "admission");
  documentedContracts();
  const front: Front = { ports, records: { timeoutMs: o.recordsTimeoutMs } };
  const gate = ipGate(ports.admission, o.trustProxy);
  const docsUrlOf = (url: URL) => o.docsUrl ?? `${url.origin}${DOCS_PATH}`;

  /** GET /readyz, behind the IP limit: each asks the daemon. */
  async function ready(req: Request, url: URL, peerIp: string): Promise<Response> {
    try {
      const wait = await gate(req, peerIp);
      if (wait !== undefined) return tooManyFromAddress(wait, docsUrlOf(url));
      return (await ports.health.ready()) ? json(200, { status: "ready" }) : unavailable();
    } catch {
      return unavailable();
    }
  }

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
    const page = o.site?.(req, url, peerIp);
    if (page) return page;
    if (path === READY_PATH) return getOnly(req, path, () => ready(req, url, peerIp));

    const authorization = req.headers.get("authorization");
    let admission: Admission;
    try {
      admission = await ports.admission.admit({
        token: bearerToken(authorization).token,
        clientIp: clientIp(peerIp, req.headers.get("x-forwarded-for"), o.trustProxy),
        withTags: (req.method === "GET" || req.method === "HEAD") && path === TAGS_PATH,
      });
      admissionFailing.succeeded();
    } catch (err) {
      admissionFailing.failed(err as Error); // every request is refused (503) meanwhile
      o.metrics?.admissionsUnavailable.inc();
      return unavailable();
    }
    const headers: Headers_ = { ...rateLimitHeaders(admission), "X-Request-Id": requestId };
    const docsUrl = () => docsUrlOf(url);
    const refused = refusedAdmission(admission, authorization, headers, docsUrl, o.log);
    if (refused) return refused;
    return serveRoute(front, { req, requestId, admission, headers }, url, o.log);
  }
  // The admitted routes: for the metrics' route labels.
  return Object.assign(handle, { routes: ROUTES });
}

/** The front on host:port (0: any free port), every request observed (observe.ts). */
export function serveApi(ports: ApiPorts, o: ApiOptions, host: string, port: number): Server<undefined> {
  const handle = observed(apiHandler(ports, o), o.metrics);
  return Bun.serve({
    hostname: host,
    port,
    // Larger bodies are cut off by Bun; up to twice the limit they get a clean 413 from readJson.
    maxRequestBodySize: 2 * MAX_BODY_BYTES,
    fetch(req, server) {
      return handle(req, server.requestIP(req)?.address ?? "0.0.0.0");
    },
    error(err) {
      o.log.error("unhandled", { error: err.message });
      return error(500, "INTERNAL", "Internal error.");
    },
  });
}
