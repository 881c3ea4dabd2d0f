import type { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";

// What the records and the hot store pass each other about an organization: below both, so
// that neither depends on the other for it.

/**
 * What admission and sending read, kept in the hot store (written through on every change and
 * rebuilt from the records on a miss). version grows with every change of the organization, so
 * an older projection never overwrites a newer one.
 */
export interface OrgProjection {
  id: string;
  slug: string;
  plan: Plan;
  version: number;
  verifiedDomains: string[];
}
