// The peer: what a user would otherwise build instead of the full path. A Bun.serve that
// authenticates the Bearer token against a static map (token -> organization, from a JSON
// file the harness writes; every organization is enterprise), then consumes from two
// rate-limiter-flexible RateLimiterRedis limiters on the same redis-server: the client IP's
// (500 per 1 s, key: X-Forwarded-For) and the organization's (2000 per 60 s). It answers
// GET /api/v1/tags with the API's body and its 8 rate-limit headers, computed from the
// organization limiter's result, or 429. Unlike the API it fetches no tags: the body is static.
// Usage: PEER_PORT=<port> REDIS_URL=<url> PEER_TOKENS=<json file> bun run loadtest/peer-server.ts (SIGHUP: read the file again)
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { rateLimitHeaders } from "../internal/api/ratelimit_headers";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { IP_QUOTA, planQuota } from "../internal/plans/plans";

const port = Number(process.env.PEER_PORT ?? "0");
const loadTokens = () =>
  new Map(Object.entries(JSON.parse(readFileSync(process.env.PEER_TOKENS!, "utf8")) as Record<string, string>));
let orgs = loadTokens();
// The harness may add organizations after a warm-up; it rewrites the file and says so.
process.on("SIGHUP", () => {
  orgs = loadTokens();
});
const QUOTA = planQuota(Plan.ENTERPRISE);
const BODY = '{"data":[]}';
const JSON_TYPE = { "Content-Type": "application/json" };

// Set up as the library's documentation sets up ioredis (its default client): no offline
// queue, so requests fail while Redis is away instead of piling up.
const redis = new Redis(process.env.REDIS_URL!, { enableOfflineQueue: false, lazyConnect: true });
redis.on("error", () => {}); // surfaced per request as a 503
await redis.connect();
const ipLimiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "peer-ip", points: IP_QUOTA, duration: 1 });
const orgLimiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "peer-org", points: QUOTA, duration: 60 });

/** The limiter rejects with its result when out of points, and with an Error when Redis fails. */
async function consume(limiter: RateLimiterRedis, key: string): Promise<{ ok: boolean; res: RateLimiterRes }> {
  try {
    return { ok: true, res: await limiter.consume(key) };
  } catch (err) {
    if (err instanceof RateLimiterRes) return { ok: false, res: err };
    throw err;
  }
}

const seconds = (res: RateLimiterRes) => Math.ceil(res.msBeforeNext / 1000);

function tooMany(res: RateLimiterRes, headers: Record<string, string>): Response {
  return new Response('{"message":"Too many requests"}', {
    status: 429,
    headers: { ...headers, ...JSON_TYPE, "Retry-After": String(seconds(res)) },
  });
}

async function tags(req: Request): Promise<Response> {
  const auth = req.headers.get("authorization");
  const org = auth?.startsWith("Bearer ") ? orgs.get(auth.slice(7)) : undefined;
  if (org === undefined) return new Response('{"code":"INVALID_TOKEN"}', { status: 401, headers: JSON_TYPE });
  // The harness is the only client and acts as the proxy: its X-Forwarded-For is the client.
  const ip = req.headers.get("x-forwarded-for")?.split(",").pop()?.trim() ?? "";
  // IP first: a flood from one address is refused without touching the organization's count.
  const byIp = await consume(ipLimiter, ip);
  if (!byIp.ok) return tooMany(byIp.res, {});
  const byOrg = await consume(orgLimiter, org);
  // The same 8 headers as the API (its formatting function), from this limiter's numbers.
  const headers = rateLimitHeaders({
    plan: Plan.ENTERPRISE,
    limit: QUOTA,
    remaining: byOrg.res.remainingPoints,
    resetSeconds: seconds(byOrg.res),
  });
  return byOrg.ok ? new Response(BODY, { headers: { ...headers, ...JSON_TYPE } }) : tooMany(byOrg.res, headers);
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port,
  routes: {
    "/api/v1/tags": { GET: tags },
    "/healthz": new Response('{"status":"ok"}', { headers: JSON_TYPE }),
  },
  fetch: () => new Response('{"code":"NOT_FOUND"}', { status: 404, headers: JSON_TYPE }),
  error: (err) =>
    new Response(JSON.stringify({ code: "UNAVAILABLE", message: err.message }), { status: 503, headers: JSON_TYPE }),
});
console.log(`peer-server listening on http://127.0.0.1:${server.port} (${orgs.size} tokens)`);

for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0));
