import { expect, test } from "bun:test";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { rateLimitHeaders } from "./ratelimit_headers";

test("rate-limit headers are byte-exact", () => {
  expect(rateLimitHeaders({ plan: Plan.PREMIUM, limit: 700, remaining: 699, resetSeconds: 1 })).toEqual({
    "RateLimit-Policy": '"premium";q=700;w=60',
    RateLimit: '"premium";r=699;t=1',
    "RateLimit-Limit": "700",
    "RateLimit-Remaining": "699",
    "RateLimit-Reset": "1",
    "X-RateLimit-Limit": "700",
    "X-RateLimit-Remaining": "699",
    "X-RateLimit-Reset": "1",
  });
  expect(rateLimitHeaders({ plan: Plan.FREE, limit: 100, remaining: 100, resetSeconds: 0 }).RateLimit).toBe(
    '"free";r=100;t=0',
  );
});
