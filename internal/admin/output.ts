import type { OrganizationJson } from "../gen/mailcore/limiter/v1/limiter_pb";
import { planNameOfJson } from "../plans/json";

// What the admin commands share about their results and their failures.

/** A command used wrongly (exit code 2). */
export class UsageError extends Error {}

export interface Output {
  out(line: string): void;
}

/** An organization as --json and the import print it (the JSON form leaves out false and empty values). */
export function orgJson(org: OrganizationJson | undefined) {
  if (!org) return {};
  return {
    id: org.id ?? "",
    slug: org.slug ?? "",
    plan: planNameOfJson(org.plan),
    domains: (org.domains ?? []).map((d) => ({ name: d.name ?? "", verified: d.verified ?? false })),
  };
}
