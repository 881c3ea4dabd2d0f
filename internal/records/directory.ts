import { randomBytes } from "node:crypto";
import type { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { OrgProjection } from "../model/projection";
import { refuseVerifiedElsewhere } from "./domains";
import { chunks, type Db, isUniqueViolation, num, numOrNull, RecordError, randomId, type Sql } from "./db";

// Organizations, their plans, API tokens (hashes only) and sending domains.

export interface Domain {
  name: string;
  verified: boolean;
}

export interface Organization {
  id: string;
  slug: string;
  plan: Plan;
  domains: Domain[];
}

export interface TokenInfo {
  id: string;
  name: string;
  createdMs: number;
  lastUsedMs: number | null;
  revokedMs: number | null;
}

/** A token hash's owner: the organization, or null when the token was revoked. */
export type TokenOwners = Map<string, string | null>;

/** An organization to create: its plan, the domains it starts with, and its first token's hash and name when it gets one. */
export interface OrganizationSpec {
  slug: string;
  plan: Plan;
  domains: Domain[];
  token?: { hash: string; name: string };
}

/** What provisioning did with one spec: created it, or found the slug taken and left that organization as it was. */
export type Provisioned =
  | { created: true; organization: Organization; projection: OrgProjection; tokenId?: string }
  | { created: false; organization: Organization };

interface OrgRow {
  id: string;
  slug: string;
  plan: number;
  version: unknown;
}

export class DirectoryRecords {
  constructor(private readonly db: Db) {}

  async createOrganization(slug: string, plan: Plan, nowMs: number): Promise<OrgProjection> {
    const [done] = await this.provisionOrganizations([{ slug, plan, domains: [] }], nowMs);
    if (!done!.created) throw new RecordError("already_exists", `organization ${slug} already exists`);
    return done!.projection;
  }

  /**
   * Creates the organizations whose slugs are free, with their domains and tokens, in one
   * transaction of a few multi-row statements; a taken slug is reported with its organization
   * as it is. Slugs are distinct, and so are the domain names of each spec.
   */
  async provisionOrganizations(specs: OrganizationSpec[], nowMs: number): Promise<Provisioned[]> {
    try {
      return await this.db.tx(async (sql) => {
        const existing = await organizationsBySlug(
          sql,
          specs.map((s) => s.slug),
        );
        const orgs: Record<string, unknown>[] = [];
        const domains: Record<string, unknown>[] = [];
        const tokens: Record<string, unknown>[] = [];
        const results = specs.map((spec): Provisioned => {
          const found = existing.get(spec.slug);
          if (found) return { created: false, organization: found };
          const id = `org_${randomBytes(8).toString("hex")}`;
          orgs.push({ id, slug: spec.slug, plan: spec.plan, version: 1, created_ms: nowMs });
          for (const d of spec.domains)
            domains.push({
              id: randomId("dom"),
              org_id: id,
              name: d.name,
              verified: d.verified ? 1 : 0,
              created_ms: nowMs,
              verify_value: newVerifyValue(),
            });
          let tokenId: string | undefined;
          if (spec.token) {
            tokenId = `tok_${randomBytes(8).toString("hex")}`;
            tokens.push({ hash: spec.token.hash, id: tokenId, org_id: id, name: spec.token.name, created_ms: nowMs });
          }
          const sorted = [...spec.domains].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
          return {
            created: true,
            organization: { id, slug: spec.slug, plan: spec.plan, domains: sorted },
            projection: {
              id,
              slug: spec.slug,
              plan: spec.plan,
              version: 1,
              verifiedDomains: sorted.filter((d) => d.verified).map((d) => d.name),
            },
            tokenId,
          };
        });
        for (const rows of chunks(orgs)) await sql`INSERT INTO organizations ${sql(rows)}`;
        for (const rows of chunks(domains)) await sql`INSERT INTO sending_domains ${sql(rows)}`;
        for (const rows of chunks(tokens)) await sql`INSERT INTO api_tokens ${sql(rows)}`;
        return results;
      });
    } catch (err) {
      // Another caller took one of the slugs between the read and the insert: nothing was written.
      if (isUniqueViolation(err))
        throw new RecordError("already_exists", "an organization of the batch was created meanwhile; try again");
      throw err;
    }
  }

  async setPlan(slug: string, plan: Plan): Promise<OrgProjection> {
    return this.db.tx(async (sql) => {
      const [row] =
        await sql`UPDATE organizations SET plan = ${plan}, version = version + 1 WHERE slug = ${slug} RETURNING id`;
      if (!row) throw noOrg(slug);
      return (await projection(sql, row.id))!;
    });
  }

  async getOrganization(slug: string): Promise<Organization> {
    return this.db.run(async (sql) => {
      const [org] = (await sql`SELECT id, slug, plan FROM organizations WHERE slug = ${slug}`) as OrgRow[];
      if (!org) throw noOrg(slug);
      const domains = await sql`SELECT name, verified FROM sending_domains WHERE org_id = ${org.id} ORDER BY name`;
      return {
        id: org.id,
        slug: org.slug,
        plan: org.plan as Plan,
        domains: domains.map((d: { name: string; verified: number }) => ({
          name: d.name,
          verified: num(d.verified) === 1,
        })),
      };
    });
  }

  /** The projection of an organization; undefined when there is none. */
  orgProjection(orgId: string): Promise<OrgProjection | undefined> {
    return this.db.run((sql) => projection(sql, orgId));
  }

  async createToken(
    slug: string,
    hash: string,
    name: string,
    nowMs: number,
  ): Promise<{ tokenId: string; orgId: string }> {
    const tokenId = `tok_${randomBytes(8).toString("hex")}`;
    return this.db.tx(async (sql) => {
      const [org] = await sql`SELECT id FROM organizations WHERE slug = ${slug}`;
      if (!org) throw noOrg(slug);
      await sql`INSERT INTO api_tokens (hash, id, org_id, name, created_ms) VALUES (${hash}, ${tokenId}, ${org.id}, ${name}, ${nowMs})`;
      return { tokenId, orgId: org.id as string };
    });
  }

  /**
   * Revokes a token; returns its organization. Revoking a revoked token again changes nothing
   * and succeeds, so a revocation whose write-through failed can simply be repeated.
   */
  async revokeToken(hash: string, nowMs: number): Promise<string> {
    const [row] = await this.db.run(
      (sql) =>
        sql`UPDATE api_tokens SET revoked_ms = COALESCE(revoked_ms, ${nowMs}) WHERE hash = ${hash} RETURNING org_id`,
    );
    if (!row) throw new RecordError("not_found", "no such token");
    return row.org_id as string;
  }

  /** Revokes an organization's token by its id; returns its hash (for the projection). Again: no change, success. */
  async revokeTokenById(orgId: string, tokenId: string, nowMs: number): Promise<string> {
    const [row] = await this.db.run(
      (sql) =>
        sql`UPDATE api_tokens SET revoked_ms = COALESCE(revoked_ms, ${nowMs}) WHERE id = ${tokenId} AND org_id = ${orgId} RETURNING hash`,
    );
    if (!row) throw new RecordError("not_found", `no token ${tokenId}`);
    return row.hash as string;
  }

  /** The owners of the given token hashes; a hash that is not there is no token. */
  async tokenOwners(hashes: string[]): Promise<TokenOwners> {
    const owners: TokenOwners = new Map();
    if (hashes.length === 0) return owners;
    const rows = await this.db.run(
      (sql) => sql`SELECT hash, org_id, revoked_ms FROM api_tokens WHERE hash IN ${sql(hashes)}`,
    );
    for (const r of rows as { hash: string; org_id: string; revoked_ms: unknown }[])
      owners.set(r.hash, r.revoked_ms === null ? r.org_id : null);
    return owners;
  }

  /** Stamps the tokens as used at nowMs, unless they already are within resolutionMs (coarse, cheap). */
  async touchTokens(hashes: string[], nowMs: number, resolutionMs: number): Promise<void> {
    if (hashes.length === 0) return;
    await this.db.run(
      (sql) => sql`UPDATE api_tokens SET last_used_ms = ${nowMs}
        WHERE hash IN ${sql(hashes)} AND (last_used_ms IS NULL OR last_used_ms <= ${nowMs - resolutionMs})`,
    );
  }

  async listTokens(orgId: string): Promise<TokenInfo[]> {
    const rows = await this.db.run(
      (sql) =>
        sql`SELECT id, name, created_ms, last_used_ms, revoked_ms FROM api_tokens WHERE org_id = ${orgId} ORDER BY created_ms, id`,
    );
    return rows.map((r: Record<string, unknown>) => ({
      id: r.id as string,
      name: r.name as string,
      createdMs: num(r.created_ms),
      lastUsedMs: numOrNull(r.last_used_ms),
      revokedMs: numOrNull(r.revoked_ms),
    }));
  }

  async addDomain(
    slug: string,
    domain: string,
    verified: boolean,
    nowMs: number,
  ): Promise<{ organization: Organization; projection: OrgProjection }> {
    const orgId = await this.db.tx(async (sql) => {
      const [row] = await sql`UPDATE organizations SET version = version + 1 WHERE slug = ${slug} RETURNING id`;
      if (!row) throw noOrg(slug);
      await sql`INSERT INTO sending_domains (id, org_id, name, verified, created_ms, verify_value) VALUES (${randomId("dom")}, ${row.id}, ${domain}, ${verified ? 1 : 0}, ${nowMs}, ${newVerifyValue()})
        ON CONFLICT (org_id, name) DO UPDATE SET verified = excluded.verified`;
      return row.id as string;
    });
    const [organization, p] = await Promise.all([this.getOrganization(slug), this.orgProjection(orgId)]);
    return { organization, projection: p! };
  }

  /** Marks an organization's domain verified; returns the organization's new projection. */
  async markDomainVerified(orgId: string, domain: string): Promise<OrgProjection> {
    return this.db.tx(async (sql) => {
      await refuseVerifiedElsewhere(sql, orgId, domain);
      const [row] =
        await sql`UPDATE sending_domains SET verified = 1 WHERE org_id = ${orgId} AND name = ${domain} RETURNING name`;
      if (!row) throw new RecordError("not_found", `no sending domain ${domain}`);
      await sql`UPDATE organizations SET version = version + 1 WHERE id = ${orgId}`;
      return (await projection(sql, orgId))!;
    });
  }
}

/** The value of a domain's TXT record: 128 random bits, hex. */
export function newVerifyValue(): string {
  return randomBytes(16).toString("hex");
}

/** The organizations with these slugs, with their domains, by slug. */
async function organizationsBySlug(sql: Sql, slugs: string[]): Promise<Map<string, Organization>> {
  const found = new Map<string, Organization>();
  for (const part of chunks(slugs)) {
    const orgs = (await sql`SELECT id, slug, plan FROM organizations WHERE slug IN ${sql(part)}`) as OrgRow[];
    if (orgs.length === 0) continue;
    const byId = new Map(
      orgs.map((o) => [o.id, { id: o.id, slug: o.slug, plan: num(o.plan) as Plan, domains: [] as Domain[] }]),
    );
    const domains =
      await sql`SELECT org_id, name, verified FROM sending_domains WHERE org_id IN ${sql([...byId.keys()])} ORDER BY name`;
    for (const d of domains as { org_id: string; name: string; verified: unknown }[])
      byId.get(d.org_id)!.domains.push({ name: d.name, verified: num(d.verified) === 1 });
    for (const o of byId.values()) found.set(o.slug, o);
  }
  return found;
}

function noOrg(slug: string): RecordError {
  return new RecordError("not_found", `no organization ${slug}`);
}

async function projection(sql: Sql, orgId: string): Promise<OrgProjection | undefined> {
  const [org] = (await sql`SELECT id, slug, plan, version FROM organizations WHERE id = ${orgId}`) as OrgRow[];
  if (!org) return undefined;
  const domains = await sql`SELECT name FROM sending_domains WHERE org_id = ${orgId} AND verified = 1 ORDER BY name`;
  return {
    id: org.id,
    slug: org.slug,
    plan: org.plan as Plan,
    version: num(org.version),
    verifiedDomains: domains.map((d: { name: string }) => d.name),
  };
}
