import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { isIP } from "node:net";
import { addressGroup } from "../clientip/clientip";
import type { Clock } from "../clock/clock";
import { type LimiterService, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { AdmissionStore, AdmitInput, AdmitResult, OrgRef } from "../hotstore/hotstore";
import type { LimiterMetrics } from "../metrics/metrics";
import { MINIMUM_PLAN, planQuota } from "../plans/plans";
import type { AudienceRecords, TagCount } from "../records/audience";
import { hashToken, isWellFormed } from "../token/token";
import {
  ADMIT_BATCH_PATH,
  type Admission,
  type AdmitCall,
  decodeAdmitBatchRequest,
  encodeAdmitBatchResponse,
  MAX_ADMIT_BATCH,
} from "../wire/admit";
import type { Projection } from "./projection";
import type { RecordsWriter } from "./recordswriter";
import type { RefusalCounter } from "./refusals";
import { guard } from "./rpc_errors";
import type { RawUnary } from "./server";
import type { Tickets } from "./tickets";

// The admission service (LimiterService): every API request and SMTP submission is admitted
// here against the hot store's buckets, with the organization's tags when the front asks for
// them. AdmitBatch is served twice: through Connect's router, and as a raw method in binary
// gRPC decoded and encoded by the hand codec (the hot path).

/** How long a daemon serves an organization's tags from memory at most without reading them again. */
const TAG_CACHE_MAX_AGE_MS = 10_000;
/** Organizations whose tags a daemon keeps at most (past it, the cache starts over). */
const TAG_CACHE_MAX_ORGS = 100_000;

export interface AdmissionDeps {
  admission: AdmissionStore;
  projection: Projection;
  /** Told each token admitted, for its coarse last use in the records. */
  writer: Pick<RecordsWriter, "tokenUsed">;
  refusals: Pick<RefusalCounter, "count">;
  tags: TagCache;
  verdicts: VerdictCounts;
  /** Make each allowed admission's ticket. */
  tickets: Pick<Tickets, "issue">;
  clock: Clock;
  /** A client's IPv6 address counts by its network of this many bits (IPV6_PREFIX_BITS). */
  ipv6PrefixBits: number;
}

/** LimiterService's methods, by name. */
export function admissionHandlers(deps: AdmissionDeps): ServiceImpl<typeof LimiterService> {
  return {
    admit: async (req) => (await admit(deps, [req]))[0]!,
    admitBatch: async (req) => ({ responses: await admitBatch(deps, req.requests) }),
  };
}

/** The methods served outside Connect's router: AdmitBatch in binary gRPC. */
export function admissionRawHandlers(deps: AdmissionDeps): Record<string, RawUnary> {
  return { [ADMIT_BATCH_PATH]: (request) => admitRawBatch(deps, request) };
}

/** AdmitBatch from its bytes: the request decoded by the hand codec, the answer encoded by it. */
export async function admitRawBatch(deps: AdmissionDeps, request: Buffer): Promise<Uint8Array> {
  let calls: AdmitCall[];
  try {
    calls = decodeAdmitBatchRequest(request);
  } catch (err) {
    throw new ConnectError(`not an AdmitBatchRequest: ${(err as Error).message}`, Code.InvalidArgument);
  }
  return encodeAdmitBatchResponse(await admitBatch(deps, calls));
}

export function admitBatch(deps: AdmissionDeps, calls: readonly AdmitCall[]): Promise<Admission[]> {
  if (calls.length > MAX_ADMIT_BATCH)
    throw new ConnectError(`a batch holds at most ${MAX_ADMIT_BATCH} requests`, Code.InvalidArgument);
  return admit(deps, calls);
}

/** Admits each call independently; an allowed call that asks for them gets its organization's tags. */
export async function admit(deps: AdmissionDeps, calls: readonly AdmitCall[]): Promise<Admission[]> {
  const inputs = calls.map((c) => toAdmitInput(c, deps.ipv6PrefixBits));
  const results = await guard(() => admitAll(deps, inputs));
  const nowMs = deps.clock.nowMs();
  const responses = results.map((r) => toAdmission(r, deps.tickets, nowMs));
  const withTags = results.flatMap((r, i) => (calls[i]!.withTags && r.verdict === Verdict.ALLOWED && r.org ? [i] : []));
  if (withTags.length > 0) {
    const tags = await deps.tags.tagsOf(withTags.map((i) => results[i]!.org!));
    for (const i of withTags) responses[i]!.tags = tags.get(results[i]!.org!.id)!;
  }
  return responses;
}

/**
 * Admits against the hot store; a projection miss is rebuilt from the records and admitted
 * again. Counts each verdict, the refusals of known organizations and the tokens used.
 */
export async function admitAll(deps: AdmissionDeps, inputs: AdmitInput[]): Promise<AdmitResult[]> {
  const { admission, projection, clock } = deps;
  const results = await admission.admit(inputs, clock.nowMs());
  const missed = results.flatMap((r, i) => (r.miss ? [i] : []));
  if (missed.length > 0) {
    await projection.rebuildTokens(missed.map((i) => inputs[i]!.tokenHash!));
    const again = await admission.admit(
      missed.map((i) => inputs[i]!),
      clock.nowMs(),
    );
    again.forEach((r, j) => {
      if (r.miss) throw new Error("the projection misses the token again after a rebuild");
      results[missed[j]!] = r;
    });
  }
  results.forEach((r, i) => {
    if (r.verdict === Verdict.ALLOWED) deps.writer.tokenUsed(inputs[i]!.tokenHash!);
    else if (r.org && (r.verdict === Verdict.ORG_LIMITED || r.verdict === Verdict.IP_LIMITED)) {
      deps.refusals.count(r.org.id, r.verdict === Verdict.ORG_LIMITED ? "quota" : "ip");
    }
    deps.verdicts.count(r.verdict);
  });
  return results;
}

/**
 * What the hot store admits of a call: its token's hash (null for a malformed one) and the
 * client its IP bucket belongs to (an IPv6 address's network of ipv6PrefixBits bits).
 */
export function toAdmitInput(req: AdmitCall, ipv6PrefixBits: number): AdmitInput {
  if (isIP(req.clientIp) === 0)
    throw new ConnectError(`client_ip is not an IP address: ${JSON.stringify(req.clientIp)}`, Code.InvalidArgument);
  // A malformed token is simply not a valid one: it still counts against the IP.
  return {
    tokenHash: isWellFormed(req.token) ? hashToken(req.token) : null,
    ip: addressGroup(req.clientIp, ipv6PrefixBits),
  };
}

/**
 * An admission as the fronts read it: whole seconds, a wait of at least a second when there is
 * one, and when allowed the ticket of its organization.
 */
export function toAdmission(r: AdmitResult, tickets: Pick<Tickets, "issue">, nowMs: number): Admission {
  const plan = r.org?.plan ?? MINIMUM_PLAN;
  return {
    verdict: r.verdict,
    orgId: r.org?.id ?? "",
    orgSlug: r.org?.slug ?? "",
    plan,
    limit: planQuota(plan),
    remaining: r.remaining,
    resetSeconds: Math.ceil(r.resetMs / 1000),
    retryAfterSeconds: r.retryAfterMs > 0 ? Math.max(1, Math.ceil(r.retryAfterMs / 1000)) : 0,
    tags: [],
    ticket: r.verdict === Verdict.ALLOWED && r.org ? tickets.issue(r.org.id, nowMs) : "",
  };
}

const VERDICT_LABELS: Record<number, string> = {
  [Verdict.ALLOWED]: "allowed",
  [Verdict.ORG_LIMITED]: "org_limited",
  [Verdict.IP_LIMITED]: "ip_limited",
  [Verdict.UNAUTHENTICATED]: "unauthenticated",
};

/** The admissions by verdict, for the metrics (nothing is counted without them). */
export class VerdictCounts {
  // The counter of each verdict, resolved once: label lookup by object costs more than the increment.
  private readonly counters: Map<number, { inc(): void } | undefined>;
  private readonly other: { inc(): void } | undefined;

  constructor(metrics?: Pick<LimiterMetrics, "admissions">) {
    this.counters = new Map(
      Object.entries(VERDICT_LABELS).map(([verdict, label]) => [Number(verdict), metrics?.admissions.labels(label)]),
    );
    this.other = metrics?.admissions.labels("unknown");
  }

  count(verdict: Verdict): void {
    (this.counters.get(verdict) ?? this.other)?.inc();
  }
}

/**
 * The tags that ride along with an admission (GET /api/v1/tags in one round trip), from memory
 * while the organization's audience stamp, read by the admission itself, is the one they were
 * read under: every change of tags or counts gives a new stamp after its commit, so a reader
 * that comes after a change never sees the tags from before it, on any daemon. The age cap
 * bounds what a lost stamp write (the hot store down just then) can leave stale.
 */
export class TagCache {
  private readonly cache = new Map<string, { stamp: string; readMs: number; tags: TagCount[] }>();

  constructor(
    private readonly audience: Pick<AudienceRecords, "tagCounts">,
    /** Monotonic ms. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  async tagsOf(orgs: OrgRef[]): Promise<Map<string, TagCount[]>> {
    const nowMs = this.now();
    const out = new Map<string, TagCount[]>();
    const stale = new Map<string, string>();
    for (const org of orgs) {
      const hit = this.cache.get(org.id);
      if (hit && org.audienceStamp && hit.stamp === org.audienceStamp && nowMs - hit.readMs < TAG_CACHE_MAX_AGE_MS)
        out.set(org.id, hit.tags);
      else stale.set(org.id, org.audienceStamp ?? "");
    }
    if (stale.size === 0) return out;
    const read = await guard(() => this.audience.tagCounts([...stale.keys()]));
    if (this.cache.size + stale.size > TAG_CACHE_MAX_ORGS) this.cache.clear();
    for (const [orgId, stamp] of stale) {
      const tags = read.get(orgId)!;
      out.set(orgId, tags);
      if (stamp) this.cache.set(orgId, { stamp, readMs: nowMs, tags });
    }
    return out;
  }
}
