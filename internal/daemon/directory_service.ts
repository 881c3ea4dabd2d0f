import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type AddDomainRequest,
  type CreateOrganizationRequest,
  type CreateTokenRequest,
  type DirectoryService,
  type GetOrganizationRequest,
  type Organization as OrganizationMsg,
  OrganizationSchema,
  type Plan,
  type ProvisionOrganizationsRequest,
  type RevokeTokenRequest,
  type SetPlanRequest,
  type VerifyTokenRequest,
} from "../gen/mailcore/limiter/v1/limiter_pb";
import type { AdmissionStore } from "../hotstore/hotstore";
import { PLANS } from "../plans/plans";
import type { Organization, OrganizationSpec } from "../records/directory";
import type { Records } from "../records/records";
import { hashToken, isWellFormed } from "../token/token";
import type { Projection } from "./projection";
import { guard } from "./rpc_errors";
import type { Signing } from "./signing";
import { tenantOf } from "./tenant";
import { ASCII_DOMAIN_NAME } from "../mail/domain_name";

// The directory service (DirectoryService): organizations, their plans, domains and API tokens
// in the records, each change written through to the hot store's projection; the admin CLI's
// and the fronts' way in.

const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const TOKEN_NAME_MAX = 100;
/** Organizations one ProvisionOrganizations call creates at most (one records transaction). */
const MAX_PROVISION_BATCH = 1000;

export interface DirectoryDeps {
  /** VerifyToken reads what a token resolves to in the projection. */
  admission: Pick<AdmissionStore, "lookupToken">;
  records: Pick<Records, "directory" | "audience">;
  projection: Projection;
  clock: Clock;
  newToken: () => string;
  /** Makes an added domain's DKIM keys. */
  signing: Pick<Signing, "ensureKeys">;
}

/** What issuing a token needs (the console's service issues them too). */
export interface TokenDeps {
  records: Pick<Records, "directory">;
  projection: Projection;
  clock: Clock;
  newToken: () => string;
}

/** DirectoryService's methods, by name. */
export function directoryHandlers(deps: DirectoryDeps): ServiceImpl<typeof DirectoryService> {
  return {
    createOrganization: (req) => createOrganization(deps, req),
    provisionOrganizations: (req) => provisionOrganizations(deps, req),
    setPlan: (req) => setPlan(deps, req),
    getOrganization: (req) => getOrganization(deps, req),
    createToken: (req) => createToken(deps, req),
    revokeToken: (req) => revokeToken(deps, req),
    addDomain: (req) => addDomain(deps, req),
    verifyToken: (req) => verifyToken(deps, req),
    listTags: (_req, ctx) => listTags(deps, tenantOf(ctx.values)),
  };
}

export async function createOrganization(deps: DirectoryDeps, req: CreateOrganizationRequest) {
  const { spec, token } = toSpec(req, deps.newToken);
  const [res] = await provision(deps, [spec], [token]);
  if (!res!.created) throw new ConnectError(`organization ${spec.slug} already exists`, Code.AlreadyExists);
  // Its domains' DKIM keys now; a batch's (provisionOrganizations) are made at their first message.
  const orgId = res!.organization!.id;
  for (const d of spec.domains) await guard(() => deps.signing.ensureKeys(orgId, d.name));
  return res!;
}

export async function provisionOrganizations(deps: DirectoryDeps, req: ProvisionOrganizationsRequest) {
  if (req.organizations.length > MAX_PROVISION_BATCH)
    throw new ConnectError(`a batch holds at most ${MAX_PROVISION_BATCH} organizations`, Code.InvalidArgument);
  const slugs = new Set<string>();
  const checked = req.organizations.map((o, i) => {
    try {
      const c = toSpec(o, deps.newToken);
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
      deps,
      checked.map((c) => c.spec),
      checked.map((c) => c.token),
    ),
  };
}

export async function setPlan(deps: DirectoryDeps, req: SetPlanRequest) {
  const { directory } = deps.records;
  const slug = checkSlug(req.slug);
  const p = await guard(() => directory.setPlan(slug, checkPlan(req.plan)));
  await guard(() => deps.projection.writeOrg(p));
  return { organization: toOrgMsg(await guard(() => directory.getOrganization(slug))) };
}

export async function getOrganization(deps: DirectoryDeps, req: GetOrganizationRequest) {
  return { organization: toOrgMsg(await guard(() => deps.records.directory.getOrganization(checkSlug(req.slug)))) };
}

export async function createToken(deps: DirectoryDeps, req: CreateTokenRequest) {
  const { token, tokenId } = await issueToken(deps, checkSlug(req.slug), req.name);
  return { token, tokenId };
}

export async function revokeToken(deps: DirectoryDeps, req: RevokeTokenRequest) {
  if (!isWellFormed(req.token)) throw new ConnectError("not a token", Code.InvalidArgument);
  const hash = hashToken(req.token);
  await guard(() => deps.records.directory.revokeToken(hash, deps.clock.nowMs()));
  await guard(() => deps.projection.writeToken(hash, null));
  return {};
}

export async function addDomain(deps: DirectoryDeps, req: AddDomainRequest) {
  const domain = checkDomain(req.domain);
  const { organization, projection: p } = await guard(() =>
    deps.records.directory.addDomain(checkSlug(req.slug), domain, req.verified, deps.clock.nowMs()),
  );
  await guard(() => deps.signing.ensureKeys(organization.id, domain));
  await guard(() => deps.projection.writeOrg(p));
  return { organization: toOrgMsg(organization) };
}

/** What a token resolves to, from the projection (rebuilt from the records on a miss). */
export async function verifyToken(deps: DirectoryDeps, req: VerifyTokenRequest) {
  if (!isWellFormed(req.token)) return { valid: false };
  const hash = hashToken(req.token);
  let found = await guard(() => deps.admission.lookupToken(hash));
  if (found.kind === "miss") {
    await guard(() => deps.projection.rebuildTokens([hash]));
    found = await guard(() => deps.admission.lookupToken(hash));
  }
  return found.kind === "valid"
    ? { valid: true, orgId: found.org.id, orgSlug: found.org.slug, plan: found.org.plan }
    : { valid: false };
}

export async function listTags(deps: DirectoryDeps, orgId: string) {
  const tags = await guard(() => deps.records.audience.tagCounts([orgId]));
  return { tags: tags.get(orgId)! };
}

/** Creates an API token in the records and writes it through to the projection (the CLI's path and the console's). */
export async function issueToken(
  { records, projection, clock, newToken }: TokenDeps,
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
 * Creates the organizations of free slugs with their domains and first tokens (one records
 * transaction), writes them through to the projection, and reports each, created or found.
 */
export async function provision(
  { records, projection, clock }: Omit<TokenDeps, "newToken">,
  specs: OrganizationSpec[],
  tokens: (string | undefined)[],
) {
  const done = await guard(() => records.directory.provisionOrganizations(specs, clock.nowMs()));
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
}

/**
 * A valid spec of the request (its domains lower-cased, each once: the last one's verified flag
 * wins), and the new token it asks for (only its hash goes to the records).
 */
export function toSpec(
  req: Pick<CreateOrganizationRequest, "slug" | "plan" | "domains" | "withToken" | "tokenName">,
  newToken: () => string,
): { spec: OrganizationSpec; token?: string } {
  const slug = checkSlug(req.slug);
  const plan = checkPlan(req.plan);
  const domains = new Map<string, boolean>();
  for (const d of req.domains) domains.set(checkDomain(d.name), d.verified);
  const spec = { slug, plan, domains: [...domains].map(([name, verified]) => ({ name, verified })) };
  if (!req.withToken) return { spec };
  const token = newToken();
  return { spec: { ...spec, token: { hash: hashToken(token), name: checkTokenName(req.tokenName) } }, token };
}

function toOrgMsg(org: Organization): OrganizationMsg {
  return create(OrganizationSchema, { id: org.id, slug: org.slug, plan: org.plan, domains: org.domains });
}

/** A domain name, lower-cased; InvalidArgument when it is not one. */
export function checkDomain(raw: string): string {
  const domain = raw.trim().toLowerCase();
  if (!ASCII_DOMAIN_NAME.test(domain))
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

/** A token's name, trimmed ("default" when empty); InvalidArgument when too long or not printable. */
export function checkTokenName(raw: string): string {
  const name = raw.trim() || "default";
  if (name.length > TOKEN_NAME_MAX || /[\x00-\x1f\x7f]/.test(name)) {
    throw new ConnectError(`a token name is 1 to ${TOKEN_NAME_MAX} printable characters`, Code.InvalidArgument);
  }
  return name;
}

export function checkPlan(plan: Plan): Plan {
  if (!PLANS.includes(plan as (typeof PLANS)[number]))
    throw new ConnectError(`unknown plan ${plan}`, Code.InvalidArgument);
  return plan;
}
