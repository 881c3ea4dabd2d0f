import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";

// The organization window (a token bucket refilled over 60 s) and the IP limit (500 requests per second).
export const ORG_PERIOD_MS = 60_000;
export const IP_QUOTA = 500;
export const IP_PERIOD_MS = 1_000;

const quotas: Record<Exclude<Plan, Plan.UNSPECIFIED>, number> = {
  [Plan.FREE]: 100,
  [Plan.PREMIUM]: 700,
  [Plan.ENTERPRISE]: 2000,
};

const names: Record<Exclude<Plan, Plan.UNSPECIFIED>, string> = {
  [Plan.FREE]: "free",
  [Plan.PREMIUM]: "premium",
  [Plan.ENTERPRISE]: "enterprise",
};

export const PLANS = [Plan.FREE, Plan.PREMIUM, Plan.ENTERPRISE] as const;

/** The minimum policy, advertised to requests without a valid token. */
export const MINIMUM_PLAN = Plan.FREE;

export function planQuota(plan: Plan): number {
  const q = quotas[plan as keyof typeof quotas];
  if (q === undefined) throw new Error(`unknown plan ${plan}`);
  return q;
}

/** The policy name used in RateLimit-Policy and RateLimit, and on the command line. */
export function planName(plan: Plan): string {
  const n = names[plan as keyof typeof names];
  if (n === undefined) throw new Error(`unknown plan ${plan}`);
  return n;
}

export function parsePlan(name: string): Plan | undefined {
  return PLANS.find((p) => names[p] === name);
}
