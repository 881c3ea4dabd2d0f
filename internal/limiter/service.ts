import { create } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import {
  type AdmitRequest,
  type AdmitResponse,
  AdmitResponseSchema,
  DirectoryService,
  LimiterService,
  type Organization as OrganizationMsg,
  OrganizationSchema,
  type Plan,
  TagSchema,
  Verdict,
} from "../gen/mailcore/limiter/v1/limiter_pb";
import type { Clock } from "../clock/clock";
import { MINIMUM_PLAN, PLANS, planQuota } from "../plans/plans";
import { hashToken, isWellFormed } from "../token/token";
import { type AdmitInput, type AdmitResult, type Organization, type Store, StoreError } from "../store/store";

export const MAX_BATCH = 1_000;
const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const DOMAIN_PATTERN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$/;

export interface ServiceDeps {
  store: Store;
  clock: Clock;
  newToken: () => string;
}

/** The daemon's RPCs: admission, the directory, and grpc.health.v1. */
export function limiterRoutes({ store, clock, newToken }: ServiceDeps) {
  const admit = async (requests: AdmitRequest[]): Promise<AdmitResponse[]> => {
    const inputs = requests.map(toAdmitInput);
    const results = await guard(() => store.admit(inputs, clock.nowMs()));
    const responses = results.map(toAdmitResponse);
    // The reads that ride along with an admission (GET /api/v1/tags in one round trip).
    await guard(() =>
      Promise.all(
        responses.map(async (res, i) => {
          if (requests[i]!.withTags && res.verdict === Verdict.ALLOWED) res.tags = (await store.listTags(res.orgId)).map((name) => create(TagSchema, { name }));
        }),
      ),
    );
    return responses;
  };

  return (router: ConnectRouter) => {
    router.service(LimiterService, {
      async admit(req) {
        const [res] = await admit([req]);
        return res!;
      },
      async admitBatch(req) {
        if (req.requests.length > MAX_BATCH) {
          throw new ConnectError(`a batch holds at most ${MAX_BATCH} requests`, Code.InvalidArgument);
        }
        return { responses: await admit(req.requests) };
      },
    });

    router.service(DirectoryService, {
      async createOrganization(req) {
        const slug = checkSlug(req.slug);
        const plan = checkPlan(req.plan);
        const id = `org_${randomBytes(8).toString("hex")}`;
        return { organization: toOrgMsg(await guard(() => store.createOrganization(id, slug, plan, clock.nowMs()))) };
      },
      async setPlan(req) {
        return { organization: toOrgMsg(await guard(() => store.setPlan(checkSlug(req.slug), checkPlan(req.plan)))) };
      },
      async getOrganization(req) {
        return { organization: toOrgMsg(await guard(() => store.getOrganization(checkSlug(req.slug)))) };
      },
      async createToken(req) {
        const slug = checkSlug(req.slug);
        const token = newToken();
        await guard(() => store.addToken(slug, hashToken(token), clock.nowMs()));
        return { token };
      },
      async revokeToken(req) {
        if (!isWellFormed(req.token)) throw new ConnectError("not a token", Code.InvalidArgument);
        await guard(() => store.revokeToken(hashToken(req.token)));
        return {};
      },
      async addDomain(req) {
        const domain = req.domain.trim().toLowerCase();
        if (!DOMAIN_PATTERN.test(domain)) throw new ConnectError(`not a domain name: ${JSON.stringify(req.domain)}`, Code.InvalidArgument);
        return { organization: toOrgMsg(await guard(() => store.addDomain(checkSlug(req.slug), domain, req.verified))) };
      },
      async verifyToken(req) {
        const org = isWellFormed(req.token) ? await guard(() => store.orgByToken(hashToken(req.token))) : undefined;
        return org ? { valid: true, orgId: org.id, orgSlug: org.slug, plan: org.plan } : { valid: false };
      },
      async listTags(req) {
        const names = await guard(() => store.listTags(req.orgId));
        return { tags: names.map((name) => ({ name })) };
      },
    });

    router.service(Health, {
      async check(req) {
        if (req.service !== "" && req.service !== LimiterService.typeName && req.service !== DirectoryService.typeName) {
          throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
        }
        const serving = await store.ping().then(
          () => true,
          () => false,
        );
        return { status: serving ? HealthCheckResponse_ServingStatus.SERVING : HealthCheckResponse_ServingStatus.NOT_SERVING };
      },
    });
  };
}

function toAdmitInput(req: AdmitRequest): AdmitInput {
  if (isIP(req.clientIp) === 0) throw new ConnectError(`client_ip is not an IP address: ${JSON.stringify(req.clientIp)}`, Code.InvalidArgument);
  // A malformed token is simply not a valid one: it still counts against the IP.
  return { tokenHash: isWellFormed(req.token) ? hashToken(req.token) : null, ip: req.clientIp };
}

function toAdmitResponse(r: AdmitResult): AdmitResponse {
  const plan = r.org?.plan ?? MINIMUM_PLAN;
  return create(AdmitResponseSchema, {
    verdict: r.verdict,
    orgId: r.org?.id ?? "",
    orgSlug: r.org?.slug ?? "",
    plan,
    limit: planQuota(plan),
    remaining: r.remaining,
    resetSeconds: Math.ceil(r.resetMs / 1000),
    retryAfterSeconds: r.retryAfterMs > 0 ? Math.max(1, Math.ceil(r.retryAfterMs / 1000)) : 0,
  });
}

function toOrgMsg(org: Organization): OrganizationMsg {
  return create(OrganizationSchema, { id: org.id, slug: org.slug, plan: org.plan, domains: org.domains });
}

function checkSlug(slug: string): string {
  if (!SLUG_PATTERN.test(slug)) {
    throw new ConnectError(`slug must be 1-63 lower-case letters, digits or inner hyphens: ${JSON.stringify(slug)}`, Code.InvalidArgument);
  }
  return slug;
}

function checkPlan(plan: Plan): Plan {
  if (!PLANS.includes(plan as (typeof PLANS)[number])) throw new ConnectError(`unknown plan ${plan}`, Code.InvalidArgument);
  return plan;
}

/** Maps store failures to RPC codes: a store that cannot be reached is UNAVAILABLE. */
export async function guard<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    if (err instanceof StoreError) throw new ConnectError(err.message, err.kind === "not_found" ? Code.NotFound : Code.AlreadyExists);
    throw new ConnectError(`store unavailable: ${(err as Error).message}`, Code.Unavailable);
  }
}

