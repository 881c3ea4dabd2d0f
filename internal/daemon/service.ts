import { create } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError } from "@connectrpc/connect";
import { isIP } from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import {
  type CreateOrganizationRequest,
  DirectoryService,
  LimiterService,
  type Organization as OrganizationMsg,
  OrganizationSchema,
  type Plan,
  Verdict,
} from "../gen/mailcore/limiter/v1/limiter_pb";
import type { Clock } from "../clock/clock";
import type { AdmissionStore, AdmitInput, AdmitResult, OrgRef, StoreLifecycle } from "../hotstore/hotstore";
import type { TagCount } from "../records/audience";
import { MINIMUM_PLAN, PLANS, planQuota } from "../plans/plans";
import type { Organization, OrganizationSpec } from "../records/directory";
import { RecordError } from "../records/db";
import { isCursor } from "../records/paging";
import type { Records } from "../records/records";
import { hashToken, isWellFormed } from "../token/token";
import type { LimiterMetrics } from "../metrics/metrics";
import type { Projection } from "./projection";
import {
  ADMIT_BATCH_PATH,
  type Admission,
  type AdmitCall,
  decodeAdmitBatchRequest,
  encodeAdmitBatchResponse,
  MAX_ADMIT_BATCH,
} from "../wire/admit";
import type { RefusalCounter } from "./refusals";
import type { RecordsWriter } from "./recordswriter";
import type { RawUnary } from "./server";

const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const DOMAIN_PATTERN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$/;
const TOKEN_NAME_MAX = 100;
/** Organizations one ProvisionOrganizations call creates at most (one records transaction). */
const MAX_PROVISION_BATCH = 1000;
/** How long a daemon serves an organization's tags from memory at most without reading them again. */
const TAG_CACHE_MAX_AGE_MS = 10_000;
/** Organizations whose tags a daemon keeps at most (past it, the cache starts over). */
const TAG_CACHE_MAX_ORGS = 100_000;

export interface ServiceDeps {
  hot: AdmissionStore & StoreLifecycle;
  records: Records;
  projection: Projection;
  writer: RecordsWriter;
  refusals: RefusalCounter;
  clock: Clock;
  newToken: () => string;
  /** Counts admissions by verdict when set. */
  metrics?: LimiterMetrics;
}

const VERDICT_LABELS: Record<number, string> = {
  [Verdict.ALLOWED]: "allowed",
  [Verdict.ORG_LIMITED]: "org_limited",
  [Verdict.IP_LIMITED]: "ip_limited",
  [Verdict.UNAUTHENTICATED]: "unauthenticated",
};

/** Creates an API token in the records and writes it through to the projection (the CLI's path and the console's). */
export async function issueToken(
  { records, projection, clock, newToken }: Pick<ServiceDeps, "records" | "projection" | "clock" | "newToken">,
  slug: string,
  rawName: string,
): Promise<{ token: string; tokenId: string; name: string; createdMs: number }> {
  const name = checkTokenName(rawName);
  const token = newToken();
  const hash = hashToken(token);
  const createdMs = clock.nowMs();
  const { orgId, tokenId } = await guard(() => records.directory.createToken(slug, hash, name, createdMs));
  await guard(() => projection.writeToken(hash, orgId));
  return { token, tokenId, name, createdMs };
}

/**
 * The daemon's RPCs: admission, the directory, and grpc.health.v1, for Connect's router;
 * and AdmitBatch in binary gRPC once more as a raw method, decoded and encoded by the hand
 * codec (the hot path).
 */
export function limiterService(deps: ServiceDeps): {
  routes: (router: ConnectRouter) => void;
  raw: Record<string, RawUnary>;
} {
  const { hot, records, projection, writer, refusals, clock, metrics } = deps;
  const { directory } = records;
  // The counter of each verdict, resolved once: label lookup by object costs more than the increment.
  const counted = new Map(
    Object.entries(VERDICT_LABELS).map(([verdict, label]) => [Number(verdict), metrics?.admissions.labels(label)]),
  );
  const otherVerdict = metrics?.admissions.labels("unknown");

  /**
   * Creates the organizations of free slugs with their domains and first tokens (one records
   * transaction), writes them through to the projection, and reports each, created or found.
   */
  const provision = async (specs: OrganizationSpec[], tokens: (string | undefined)[]) => {
    const done = await guard(() => directory.provisionOrganizations(specs, clock.nowMs()));
    await guard(() =>
      Promise.all(
        done.flatMap((d, i) => {
          if (!d.created) return [];
          const token = specs[i]!.token;
          return [
            projection.writeOrg(d.projection),
            ...(token ? [projection.writeToken(token.hash, d.projection.id)] : []),
          ];
        }),
      ),
    );
    return done.map((d, i) => ({
      organization: toOrgMsg(d.organization),
      created: d.created,
      token: d.created ? (tokens[i] ?? "") : "",
      tokenId: d.created ? (d.tokenId ?? "") : "",
    }));
  };
  /** A valid spec of the request, and the new token it asks for (only its hash goes to the records). */
  const toSpec = (req: CreateOrganizationRequest): { spec: OrganizationSpec; token?: string } => {
    const slug = checkSlug(req.slug);
    const plan = checkPlan(req.plan);
    const domains = new Map<string, boolean>();
    for (const d of req.domains) domains.set(checkDomain(d.name), d.verified);
    const spec = { slug, plan, domains: [...domains].map(([name, verified]) => ({ name, verified })) };
    if (!req.withToken) return { spec };
    const token = deps.newToken();
    return { spec: { ...spec, token: { hash: hashToken(token), name: checkTokenName(req.tokenName) } }, token };
  };

  /** Admits against the hot store; a projection miss is rebuilt from the records and admitted again. */
  const admitAll = async (inputs: AdmitInput[]): Promise<AdmitResult[]> => {
    const results = await hot.admit(inputs, clock.nowMs());
    const missed = results.flatMap((r, i) => (r.miss ? [i] : []));
    if (missed.length > 0) {
      await projection.rebuildTokens(missed.map((i) => inputs[i]!.tokenHash!));
      const again = await hot.admit(
        missed.map((i) => inputs[i]!),
        clock.nowMs(),
      );
      again.forEach((r, j) => {
        if (r.miss) throw new Error("the projection misses the token again after a rebuild");
        results[missed[j]!] = r;
      });
    }
    results.forEach((r, i) => {
      if (r.verdict === Verdict.ALLOWED) writer.tokenUsed(inputs[i]!.tokenHash!);
      else if (r.org && (r.verdict === Verdict.ORG_LIMITED || r.verdict === Verdict.IP_LIMITED)) {
        refusals.count(r.org.id, r.verdict === Verdict.ORG_LIMITED ? "quota" : "ip");
      }
      (counted.get(r.verdict) ?? otherVerdict)?.inc();
    });
    return results;
  };

  // The tags that ride along with an admission (GET /api/v1/tags in one round trip), from memory
  // while the organization's audience stamp, read by the admission itself, is the one they were
  // read under: every change of tags or counts gives a new stamp after its commit, so a reader
  // that comes after a change never sees the tags from before it, on any daemon. The age cap
  // bounds what a lost stamp write (the hot store down just then) can leave stale.
  const tagCache = new Map<string, { stamp: string; readMs: number; tags: TagCount[] }>();
  records.audience.tagsChanged = (orgId) => hot.touchAudience(orgId);
  const tagsOf = async (orgs: OrgRef[]): Promise<Map<string, TagCount[]>> => {
    const nowMs = performance.now();
    const out = new Map<string, TagCount[]>();
    const stale = new Map<string, string>();
    for (const org of orgs) {
      const hit = tagCache.get(org.id);
      if (hit && org.audienceStamp && hit.stamp === org.audienceStamp && nowMs - hit.readMs < TAG_CACHE_MAX_AGE_MS)
        out.set(org.id, hit.tags);
      else stale.set(org.id, org.audienceStamp ?? "");
    }
    if (stale.size === 0) return out;
    const read = await guard(() => records.audience.tagCounts([...stale.keys()]));
    if (tagCache.size + stale.size > TAG_CACHE_MAX_ORGS) tagCache.clear();
    for (const [orgId, stamp] of stale) {
      const tags = read.get(orgId)!;
      out.set(orgId, tags);
      if (stamp) tagCache.set(orgId, { stamp, readMs: nowMs, tags });
    }
    return out;
  };

  const admit = async (calls: readonly AdmitCall[]): Promise<Admission[]> => {
    const inputs = calls.map(toAdmitInput);
    const results = await guard(() => admitAll(inputs));
    const responses = results.map(toAdmission);
    const withTags = results.flatMap((r, i) =>
      calls[i]!.withTags && r.verdict === Verdict.ALLOWED && r.org ? [i] : [],
    );
    if (withTags.length > 0) {
      const tags = await tagsOf(withTags.map((i) => results[i]!.org!));
      for (const i of withTags) responses[i]!.tags = tags.get(results[i]!.org!.id)!;
    }
    return responses;
  };
  const admitBatch = (calls: readonly AdmitCall[]) => {
    if (calls.length > MAX_ADMIT_BATCH)
      throw new ConnectError(`a batch holds at most ${MAX_ADMIT_BATCH} requests`, Code.InvalidArgument);
    return admit(calls);
  };

  const raw: Record<string, RawUnary> = {
    [ADMIT_BATCH_PATH]: async (request) => {
      let calls: AdmitCall[];
      try {
        calls = decodeAdmitBatchRequest(request);
      } catch (err) {
        throw new ConnectError(`not an AdmitBatchRequest: ${(err as Error).message}`, Code.InvalidArgument);
      }
      return encodeAdmitBatchResponse(await admitBatch(calls));
    },
  };

  const routes = (router: ConnectRouter) => {
    router.service(LimiterService, {
      async admit(req) {
        const [res] = await admit([req]);
        return res!;
      },
      async admitBatch(req) {
        return { responses: await admitBatch(req.requests) };
      },
    });

    router.service(DirectoryService, {
      async createOrganization(req) {
        const { spec, token } = toSpec(req);
        const [res] = await provision([spec], [token]);
        if (!res!.created) throw new ConnectError(`organization ${spec.slug} already exists`, Code.AlreadyExists);
        return res!;
      },
      async provisionOrganizations(req) {
        if (req.organizations.length > MAX_PROVISION_BATCH)
          throw new ConnectError(`a batch holds at most ${MAX_PROVISION_BATCH} organizations`, Code.InvalidArgument);
        const slugs = new Set<string>();
        const checked = req.organizations.map((o, i) => {
          try {
            const c = toSpec(o);
            if (slugs.has(c.spec.slug))
              throw new ConnectError(`slug ${c.spec.slug} is in the batch twice`, Code.InvalidArgument);
            slugs.add(c.spec.slug);
            return c;
          } catch (err) {
            throw err instanceof ConnectError
              ? new ConnectError(`organization ${i + 1} of the batch: ${err.rawMessage}`, err.code)
              : err;
          }
        });
        return {
          results: await provision(
            checked.map((c) => c.spec),
            checked.map((c) => c.token),
          ),
        };
      },
      async setPlan(req) {
        const slug = checkSlug(req.slug);
        const p = await guard(() => directory.setPlan(slug, checkPlan(req.plan)));
        await guard(() => projection.writeOrg(p));
        return { organization: toOrgMsg(await guard(() => directory.getOrganization(slug))) };
      },
      async getOrganization(req) {
        return { organization: toOrgMsg(await guard(() => directory.getOrganization(checkSlug(req.slug)))) };
      },
      async createToken(req) {
        const { token, tokenId } = await issueToken(deps, checkSlug(req.slug), req.name);
        return { token, tokenId };
      },
      async revokeToken(req) {
        if (!isWellFormed(req.token)) throw new ConnectError("not a token", Code.InvalidArgument);
        const hash = hashToken(req.token);
        await guard(() => directory.revokeToken(hash, clock.nowMs()));
        await guard(() => projection.writeToken(hash, null));
        return {};
      },
      async addDomain(req) {
        const domain = checkDomain(req.domain);
        const { organization, projection: p } = await guard(() =>
          directory.addDomain(checkSlug(req.slug), domain, req.verified, clock.nowMs()),
        );
        await guard(() => projection.writeOrg(p));
        return { organization: toOrgMsg(organization) };
      },
      async verifyToken(req) {
        if (!isWellFormed(req.token)) return { valid: false };
        const hash = hashToken(req.token);
        let found = await guard(() => hot.lookupToken(hash));
        if (found.kind === "miss") {
          await guard(() => projection.rebuildTokens([hash]));
          found = await guard(() => hot.lookupToken(hash));
        }
        return found.kind === "valid"
          ? { valid: true, orgId: found.org.id, orgSlug: found.org.slug, plan: found.org.plan }
          : { valid: false };
      },
      async listTags(req) {
        const tags = await guard(() => records.audience.tagCounts([req.orgId]));
        return { tags: tags.get(req.orgId)! };
      },
    });

    router.service(Health, {
      async check(req) {
        if (
          req.service !== "" &&
          req.service !== LimiterService.typeName &&
          req.service !== DirectoryService.typeName
        ) {
          throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
        }
        // Serving as long as the hot store answers: admission and sending need nothing else.
        const serving = await hot.ping().then(
          () => true,
          () => false,
        );
        return {
          status: serving ? HealthCheckResponse_ServingStatus.SERVING : HealthCheckResponse_ServingStatus.NOT_SERVING,
        };
      },
    });
  };
  return { routes, raw };
}

function toAdmitInput(req: AdmitCall): AdmitInput {
  if (isIP(req.clientIp) === 0)
    throw new ConnectError(`client_ip is not an IP address: ${JSON.stringify(req.clientIp)}`, Code.InvalidArgument);
  // A malformed token is simply not a valid one: it still counts against the IP.
  return { tokenHash: isWellFormed(req.token) ? hashToken(req.token) : null, ip: req.clientIp };
}

function toAdmission(r: AdmitResult): Admission {
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
  };
}

function toOrgMsg(org: Organization): OrganizationMsg {
  return create(OrganizationSchema, { id: org.id, slug: org.slug, plan: org.plan, domains: org.domains });
}

/** A domain name, lower-cased; InvalidArgument when it is not one. */
export function checkDomain(raw: string): string {
  const domain = raw.trim().toLowerCase();
  if (!DOMAIN_PATTERN.test(domain))
    throw new ConnectError(`not a domain name: ${JSON.stringify(raw)}`, Code.InvalidArgument);
  return domain;
}

export function checkSlug(slug: string): string {
  if (!SLUG_PATTERN.test(slug)) {
    throw new ConnectError(
      `slug must be 1-63 lower-case letters, digits or inner hyphens: ${JSON.stringify(slug)}`,
      Code.InvalidArgument,
    );
  }
  return slug;
}

function checkTokenName(raw: string): string {
  const name = raw.trim() || "default";
  if (name.length > TOKEN_NAME_MAX || /[\x00-\x1f\x7f]/.test(name)) {
    throw new ConnectError(`a token name is 1 to ${TOKEN_NAME_MAX} printable characters`, Code.InvalidArgument);
  }
  return name;
}

function checkPlan(plan: Plan): Plan {
  if (!PLANS.includes(plan as (typeof PLANS)[number]))
    throw new ConnectError(`unknown plan ${plan}`, Code.InvalidArgument);
  return plan;
}

/** Maps store failures to RPC codes: a store (hot or records) that cannot be reached is UNAVAILABLE. */
export async function guard<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    if (err instanceof RecordError)
      throw new ConnectError(err.message, err.kind === "not_found" ? Code.NotFound : Code.AlreadyExists);
    throw new ConnectError(`store unavailable: ${(err as Error).message}`, Code.Unavailable, undefined, undefined, err);
  }
}

/** A list's cursor for the records: undefined for the first page; InvalidArgument when no page handed it out. */
export function pageCursor(cursor: string): string | undefined {
  if (cursor === "") return undefined;
  if (!isCursor(cursor)) throw new ConnectError("not a cursor of this list", Code.InvalidArgument);
  return cursor;
}
