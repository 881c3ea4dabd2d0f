import type { AdmissionStore } from "../hotstore/hotstore";
import type { OrgProjection } from "../model/projection";
import type { DirectoryRecords } from "../records/directory";

/**
 * Keeps the hot store's projection of the directory (token hash to organization, organization
 * to plan and verified domains) in step with the records: written through on every change,
 * rebuilt from the records on a miss, so a hot store that restarts empty admits correctly on
 * the next request.
 */
export class Projection {
  constructor(
    private readonly admission: AdmissionStore,
    private readonly directory: DirectoryRecords,
  ) {}

  /** Rebuilds what these token hashes resolve to, and their organizations, from the records. */
  async rebuildTokens(hashes: string[]): Promise<void> {
    const unique = [...new Set(hashes)];
    const owners = await this.directory.tokenOwners(unique);
    const orgs = new Set([...owners.values()].filter((o): o is string => o !== null));
    // Organizations first: a token that resolves to an organization not projected yet would miss again.
    await Promise.all([...orgs].map((id) => this.rebuildOrg(id)));
    await Promise.all(unique.map((hash) => this.admission.projectToken(hash, owners.get(hash) ?? null, "fill")));
  }

  async rebuildOrg(orgId: string): Promise<void> {
    const p = await this.directory.orgProjection(orgId);
    if (p) await this.admission.projectOrg(p);
  }

  /** After a change of an organization in the records. */
  writeOrg(p: OrgProjection): Promise<void> {
    return this.admission.projectOrg(p);
  }

  /** After a token was created (orgId) or revoked (null) in the records. */
  writeToken(hash: string, orgId: string | null): Promise<void> {
    return this.admission.projectToken(hash, orgId, "write");
  }
}
