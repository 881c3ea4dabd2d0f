import { randomBytes } from "node:crypto";
import type { ApiMetrics } from "../metrics/metrics";

/** A client's X-Request-Id is kept when it is a sane token; otherwise the API makes one. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

// A made id is this process's random 48-bit prefix and a 48-bit counter: unique without
// drawing random bytes for every request (ids name requests; they are not secrets).
const ID_PREFIX = `req_${randomBytes(6).toString("hex")}`;
let idCounter = 0;

export function requestIdOf(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given !== null && CLIENT_REQUEST_ID.test(given)
    ? given
    : ID_PREFIX + (idCounter++).toString(16).padStart(12, "0");
}

/** The paths the front answers outside its route table that are labelled as themselves. */
const FIXED_PATHS = new Set(["/healthz", "/readyz", "/docs/rate-limits"]);

/** A route of the front's table: its path template is its label. */
export interface LabelledRoute {
  pattern: RegExp;
  template: string;
}

/** The route of a path as a metric label (a bounded set: ids are folded into the template, unknown paths are "other"). */
export function routeLabel(path: string, routes: readonly LabelledRoute[]): string {
  if (FIXED_PATHS.has(path)) return path;
  return routes.find((r) => r.pattern.test(path))?.template ?? "other";
}

type Handle = (req: Request, peerIp: string, requestId: string) => Promise<Response>;

/** Gives every request an id (echoed as X-Request-Id) and counts and times it by route and status. */
export function observed(
  handle: Handle & { routes: readonly LabelledRoute[] },
  metrics: ApiMetrics | undefined,
): (req: Request, peerIp: string) => Promise<Response> {
  return async (req, peerIp) => {
    const started = performance.now();
    const requestId = requestIdOf(req);
    const res = await handle(req, peerIp, requestId);
    // Admitted answers carry it already (with their rate-limit headers); setting a header on a built Response costs more than asking.
    if (!res.headers.has("X-Request-Id")) res.headers.set("X-Request-Id", requestId);
    if (metrics) {
      const path = req.url.slice(req.url.indexOf("/", req.url.indexOf("//") + 2)).split("?")[0]!;
      const route = routeLabel(path, handle.routes);
      metrics.requests.inc({ route, status: String(res.status) });
      metrics.duration.observe({ route }, (performance.now() - started) / 1_000);
    }
    return res;
  };
}
