import type { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { MailStore } from "./mail";

// Store is the daemon's one seam to its state. Two adapters implement it, Redis and
// embedded (memory + bun:sqlite), and both run the same conformance suite.

export interface AdmitInput {
  /** sha256 of the presented token, or null when none (or a malformed one) was presented. */
  tokenHash: string | null;
  ip: string;
}

export interface OrgRef {
  id: string;
  slug: string;
  plan: Plan;
}

export interface AdmitResult {
  verdict: Verdict;
  /** Set when the token was valid. */
  org?: OrgRef;
  /** Whole tokens left in the organization bucket (the minimum quota when there is no org). */
  remaining: number;
  /** Milliseconds until the organization bucket is full (0 when there is no org). */
  resetMs: number;
  /** On a limited verdict: milliseconds until the request would be admitted. */
  retryAfterMs: number;
}

export interface Domain {
  name: string;
  verified: boolean;
}

export interface Organization extends OrgRef {
  domains: Domain[];
}

export interface Store extends MailStore {
  /**
   * Admits each input independently: the IP bucket and, for a valid token, the
   * organization bucket are checked and consumed in one atomic step (both or neither).
   */
  admit(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]>;

  createOrganization(id: string, slug: string, plan: Plan, nowMs: number): Promise<Organization>;
  setPlan(slug: string, plan: Plan): Promise<Organization>;
  getOrganization(slug: string): Promise<Organization>;
  addToken(slug: string, tokenHash: string, nowMs: number): Promise<void>;
  revokeToken(tokenHash: string): Promise<void>;
  /** The organization a token belongs to; undefined for an unknown or revoked token. */
  orgByToken(tokenHash: string): Promise<OrgRef | undefined>;
  addDomain(slug: string, domain: string, verified: boolean): Promise<Organization>;
  listTags(orgId: string): Promise<string[]>;

  /** Rejects when the backing service cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export type StoreErrorKind = "not_found" | "already_exists";

export class StoreError extends Error {
  constructor(
    readonly kind: StoreErrorKind,
    message: string,
  ) {
    super(message);
  }
}
