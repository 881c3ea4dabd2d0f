// The limits of the peers (peer-server.ts, send-peer.ts), as a user of rate-limiter-flexible
// would set them up: the client IP's limiter (500 per 1 s) first, so a flood from one address
// is refused without touching the organization's count, then the organization's (2000 per
// 60 s, enterprise), both RateLimiterRedis on one ioredis client; the API's 8 rate-limit
// headers computed from the organization limiter's result.
import { Redis } from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { rateLimitHeaders } from "../internal/api/ratelimit_headers";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { IP_QUOTA, planQuota } from "../internal/plans/plans";

export const JSON_TYPE = { "Content-Type": "application/json" };

export type PeerAdmission = { ok: true; headers: Record<string, string> } | { ok: false; refusal: Response };

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

export async function peerLimits(redisUrl: string) {
  // Set up as the library's documentation sets up ioredis (its default client): no offline
  // queue, so requests fail while Redis is away instead of piling up.
  const redis = new Redis(redisUrl, { enableOfflineQueue: false, lazyConnect: true });
  redis.on("error", () => {}); // surfaced per request as a 503
  await redis.connect();
  const quota = planQuota(Plan.ENTERPRISE);
  const ipLimiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "peer-ip", points: IP_QUOTA, duration: 1 });
  const orgLimiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "peer-org", points: quota, duration: 60 });
  /** A request of `org` from `ip`: its rate-limit headers, or the 429 that refuses it. */
  async function admit(ip: string, org: string): Promise<PeerAdmission> {
    const byIp = await consume(ipLimiter, ip);
    if (!byIp.ok) return { ok: false, refusal: tooMany(byIp.res, {}) };
    const byOrg = await consume(orgLimiter, org);
    const headers = rateLimitHeaders({
      plan: Plan.ENTERPRISE,
      limit: quota,
      remaining: byOrg.res.remainingPoints,
      resetSeconds: seconds(byOrg.res),
    });
    return byOrg.ok ? { ok: true, headers } : { ok: false, refusal: tooMany(byOrg.res, headers) };
  }
  return { redis, admit };
}
