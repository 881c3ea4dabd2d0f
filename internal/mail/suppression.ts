// Why an address is on an organization's suppression list: a hard bounce, soft bounces that
// repeated (internal/feedback's rule), a complaint, or the organization's own choice.

export const SUPPRESSION_REASONS = ["hard_bounce", "soft_bounce", "complaint", "manual"] as const;

export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

export function isSuppressionReason(v: unknown): v is SuppressionReason {
  return (SUPPRESSION_REASONS as readonly unknown[]).includes(v);
}
