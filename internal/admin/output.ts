import type { Organization } from "../gen/mailcore/limiter/v1/limiter_pb";
import { planName } from "../plans/plans";

// What the admin commands share about their results and their failures.

/** A command used wrongly (exit code 2). */
export class UsageError extends Error {}

export interface Output {
  out(line: string): void;
}

/** An organization as --json and the import print it. */
export function orgJson(org: Organization | undefined) {
  if (!org) return {};
  return {
    id: org.id,
    slug: org.slug,
    plan: planName(org.plan),
    domains: org.domains.map((d) => ({ name: d.name, verified: d.verified })),
  };
}
