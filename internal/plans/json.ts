import type { Plan, PlanJson } from "../gen/mailcore/limiter/v1/limiter_pb";

// The plans as the contract's JSON form names them ("PLAN_FREE"), for callers of the daemon in
// that form (the admin CLI), which load no generated code: the types below tie the names to it.

type PlanName = Lowercase<Exclude<keyof typeof Plan, "UNSPECIFIED">>;

const JSON_NAMES: Record<PlanName, PlanJson> = {
  free: "PLAN_FREE",
  premium: "PLAN_PREMIUM",
  enterprise: "PLAN_ENTERPRISE",
};

/** The plan a name means on the command line or in an import ("free"), in the JSON form; undefined when it names none. */
export function parsePlanJson(name: string): PlanJson | undefined {
  return Object.hasOwn(JSON_NAMES, name) ? JSON_NAMES[name as PlanName] : undefined;
}

/** The name of a plan in the JSON form ("PLAN_FREE" is free); the daemon's answers always name one. */
export function planNameOfJson(plan: PlanJson | undefined): string {
  const name = Object.entries(JSON_NAMES).find(([, json]) => json === plan)?.[0];
  if (name === undefined) throw new Error(`unknown plan ${plan}`);
  return name;
}
