import { type Db, num, numOrNull, RecordError, type Sql } from "./db";

// A sending domain as the domains API and the signing see it: its id, its DKIM keys (the
// private keys sealed under the master key: nothing here can open them), and the records of
// its last DNS check. The organization's side of a domain (its plan's projection, the console's
// ownership check) is directory.ts's.

export type DkimKeyState = "active" | "pending" | "retired";

export interface DkimKeyRow {
  selector: string;
  algorithm: "rsa-sha256" | "ed25519-sha256";
  /** The p= value of its record. */
  publicKey: string;
  /** internal/dkim's sealed form (dkimseal1....): opened with the master key only. */
  sealedKey: string;
  /** active: it signs; pending: a rotation's, until its record verifies; retired: signed before. */
  state: DkimKeyState;
  createdMs: number;
  /** When it took its state (a retired key: when it stopped signing). */
  changedMs: number;
}

/** A key to add: made and sealed by the caller. */
export type NewDkimKey = Pick<DkimKeyRow, "selector" | "algorithm" | "publicKey" | "sealedKey" | "state">;

export interface SendingDomainRow {
  id: string;
  orgId: string;
  /** ASCII, lower case (an IDN as punycode). */
  name: string;
  verified: boolean;
  /** The value of its ownership TXT record. */
  verifyValue: string;
  createdMs: number;
  keys: DkimKeyRow[];
  /** The records of the last check (JSON as the API shows them); null before the first. */
  checked: unknown[] | null;
  checkedMs: number | null;
}

/**
 * What a check writes: its records, whether the domain may send from now on, and the keys it
 * promoted. A domain once allowed to send stays allowed (a record gone later raises an alert
 * and changes its status, not its mail): a check grants, never revokes.
 */
export interface CheckWrite {
  records: unknown[];
  grant: boolean;
  /** When the recheck loop checks it next. */
  nextMs: number;
  /** Whether an active key's DKIM record failed: the domain signs on, and an alert counts it. */
  dkimFailing: boolean;
  /** The pending keys whose records verified: they become active, and the active ones retired. */
  promote: string[];
}

interface DomainRow {
  id: string;
  org_id: string;
  name: string;
  verified: unknown;
  verify_value: string;
  created_ms: unknown;
  checked_json: string | null;
  checked_ms: unknown;
}

function keyOf(r: Record<string, unknown>): DkimKeyRow {
  return {
    selector: r.selector as string,
    algorithm: r.algorithm as DkimKeyRow["algorithm"],
    publicKey: r.public_key as string,
    sealedKey: r.sealed_key as string,
    state: r.state as DkimKeyState,
    createdMs: num(r.created_ms),
    changedMs: num(r.changed_ms),
  };
}

export class DomainRecords {
  constructor(private readonly db: Db) {}

  /**
   * Adds an unverified domain with its keys, in one transaction: already_exists when the
   * organization has it, or when another organization has verified it (a name is verified for
   * one organization at a time).
   */
  async add(o: {
    id: string;
    orgId: string;
    name: string;
    verifyValue: string;
    keys: NewDkimKey[];
    nowMs: number;
  }): Promise<SendingDomainRow> {
    await this.db.tx(async (sql) => {
      await refuseVerifiedElsewhere(sql, o.orgId, o.name);
      const added = await sql`INSERT INTO sending_domains (id, org_id, name, verified, created_ms, verify_value)
        VALUES (${o.id}, ${o.orgId}, ${o.name}, 0, ${o.nowMs}, ${o.verifyValue})
        ON CONFLICT (org_id, name) DO NOTHING RETURNING id`;
      if (added.length === 0)
        throw new RecordError("already_exists", `${o.name} is already a sending domain of this organization`);
      await insertKeys(sql, o.orgId, o.name, o.keys, o.nowMs);
    });
    return (await this.get(o.orgId, o.id))!;
  }

  /** Adds keys to a domain (its first ones, or a rotation's); a selector it has already is left as it is. */
  async addKeys(orgId: string, name: string, keys: NewDkimKey[], nowMs: number): Promise<void> {
    await this.db.tx((sql) => insertKeys(sql, orgId, name, keys, nowMs));
  }

  async get(orgId: string, id: string): Promise<SendingDomainRow | undefined> {
    return (await this.select((sql) => sql`SELECT * FROM sending_domains WHERE org_id = ${orgId} AND id = ${id}`))[0];
  }

  async byName(orgId: string, name: string): Promise<SendingDomainRow | undefined> {
    return (
      await this.select((sql) => sql`SELECT * FROM sending_domains WHERE org_id = ${orgId} AND name = ${name}`)
    )[0];
  }

  /** An organization's domains, by name. */
  list(orgId: string): Promise<SendingDomainRow[]> {
    return this.select((sql) => sql`SELECT * FROM sending_domains WHERE org_id = ${orgId} ORDER BY name`);
  }

  /** Domains (of every organization) whose next check is due at nowMs, the longest due first. */
  due(nowMs: number, limit: number): Promise<SendingDomainRow[]> {
    return this.select(
      (sql) => sql`SELECT * FROM sending_domains
        WHERE next_check_ms IS NULL OR next_check_ms <= ${nowMs} ORDER BY COALESCE(next_check_ms, 0), id LIMIT ${limit}`,
    );
  }

  /** How many domains' last check found an active DKIM key's record failed. */
  async countDkimFailing(): Promise<number> {
    const [row] = await this.db.run((sql) => sql`SELECT COUNT(*) AS n FROM sending_domains WHERE dkim_failing = 1`);
    return num(row.n);
  }

  /** Sets when a domain is checked next, and nothing else (a check DNS did not answer). */
  async postpone(orgId: string, id: string, nextMs: number): Promise<void> {
    await this.db.run(
      (sql) => sql`UPDATE sending_domains SET next_check_ms = ${nextMs} WHERE org_id = ${orgId} AND id = ${id}`,
    );
  }

  /** Every sealed key, a page at a time by (org, domain, selector): what a start opens to check its master key. */
  async sealedKeys(
    after: [string, string, string] | undefined,
    limit: number,
  ): Promise<{ orgId: string; domain: string; selector: string; sealedKey: string }[]> {
    const [o, d, s] = after ?? ["", "", ""];
    const rows = await this.db.run(
      (sql) => sql`SELECT org_id, domain, selector, sealed_key FROM dkim_keys
        WHERE org_id > ${o} OR (org_id = ${o} AND (domain > ${d} OR (domain = ${d} AND selector > ${s})))
        ORDER BY org_id, domain, selector LIMIT ${limit}`,
    );
    return rows.map((r: Record<string, string>) => ({
      orgId: r.org_id!,
      domain: r.domain!,
      selector: r.selector!,
      sealedKey: r.sealed_key!,
    }));
  }

  /** The keys of an organization's domain (none when it has no such domain). */
  async keys(orgId: string, name: string): Promise<DkimKeyRow[]> {
    const rows = await this.db.run(
      (sql) => sql`SELECT * FROM dkim_keys WHERE org_id = ${orgId} AND domain = ${name} ORDER BY created_ms, selector`,
    );
    return rows.map(keyOf);
  }

  /**
   * Writes a check: its records, the domain's verdict, and the promotions of the pending keys
   * whose records verified (each active key of the same algorithm is retired then). Whether the
   * domain could send before is returned, read in the same transaction.
   */
  async saveCheck(orgId: string, id: string, check: CheckWrite, nowMs: number): Promise<{ wasVerified: boolean }> {
    return this.db.tx(async (sql) => {
      const [row] = await sql`SELECT name, verified FROM sending_domains WHERE org_id = ${orgId} AND id = ${id}`;
      if (!row) throw new RecordError("not_found", `no sending domain ${id}`);
      const wasVerified = num(row.verified) === 1;
      const granted = check.grant && !wasVerified;
      if (granted) await refuseVerifiedElsewhere(sql, orgId, row.name);
      await sql`UPDATE sending_domains SET checked_json = ${JSON.stringify(check.records)}, checked_ms = ${nowMs},
        next_check_ms = ${check.nextMs}, dkim_failing = ${check.dkimFailing ? 1 : 0}, verified = ${wasVerified || granted ? 1 : 0} WHERE org_id = ${orgId} AND id = ${id}`;
      if (granted) await sql`UPDATE organizations SET version = version + 1 WHERE id = ${orgId}`;
      for (const selector of check.promote) {
        const [k] = await sql`SELECT algorithm FROM dkim_keys
          WHERE org_id = ${orgId} AND domain = ${row.name} AND selector = ${selector} AND state = 'pending'`;
        if (!k) continue;
        await sql`UPDATE dkim_keys SET state = 'retired', changed_ms = ${nowMs}
          WHERE org_id = ${orgId} AND domain = ${row.name} AND algorithm = ${k.algorithm} AND state = 'active'`;
        await sql`UPDATE dkim_keys SET state = 'active', changed_ms = ${nowMs}
          WHERE org_id = ${orgId} AND domain = ${row.name} AND selector = ${selector}`;
      }
      return { wasVerified };
    });
  }

  /** Forgets retired keys that stopped signing before beforeMs (their records were shown removable). */
  async dropRetired(orgId: string, name: string, beforeMs: number): Promise<void> {
    await this.db.run(
      (sql) =>
        sql`DELETE FROM dkim_keys WHERE org_id = ${orgId} AND domain = ${name} AND state = 'retired' AND changed_ms < ${beforeMs}`,
    );
  }

  /** Removes a domain and its keys; not_found when the organization has no such domain. */
  async remove(orgId: string, id: string): Promise<SendingDomainRow> {
    return this.db.tx(async (sql) => {
      const [found] = await this.selectIn(
        sql,
        await sql`SELECT * FROM sending_domains WHERE org_id = ${orgId} AND id = ${id}`,
      );
      if (!found) throw new RecordError("not_found", `no sending domain ${id}`);
      await sql`DELETE FROM dkim_keys WHERE org_id = ${orgId} AND domain = ${found.name}`;
      await sql`DELETE FROM sending_domains WHERE org_id = ${orgId} AND id = ${id}`;
      await sql`UPDATE organizations SET version = version + 1 WHERE id = ${orgId}`;
      return found;
    });
  }

  private select(query: (sql: Sql) => Promise<unknown[]>): Promise<SendingDomainRow[]> {
    return this.db.run(async (sql) => this.selectIn(sql, (await query(sql)) as DomainRow[]));
  }

  /** The rows with their keys. */
  private async selectIn(sql: Sql, rows: DomainRow[]): Promise<SendingDomainRow[]> {
    const out: SendingDomainRow[] = [];
    for (const r of rows) {
      const keys =
        await sql`SELECT * FROM dkim_keys WHERE org_id = ${r.org_id} AND domain = ${r.name} ORDER BY created_ms, selector`;
      out.push({
        id: r.id,
        orgId: r.org_id,
        name: r.name,
        verified: num(r.verified) === 1,
        verifyValue: r.verify_value,
        createdMs: num(r.created_ms),
        keys: keys.map(keyOf),
        checked: r.checked_json === null ? null : (JSON.parse(r.checked_json) as unknown[]),
        checkedMs: numOrNull(r.checked_ms),
      });
    }
    return out;
  }
}

/** A name another organization has verified cannot be added or verified here. */
export async function refuseVerifiedElsewhere(sql: Sql, orgId: string, name: string): Promise<void> {
  const [other] =
    await sql`SELECT org_id FROM sending_domains WHERE name = ${name} AND verified = 1 AND org_id <> ${orgId} LIMIT 1`;
  if (other)
    throw new RecordError("already_exists", `${name} is verified by another organization: it cannot be added here`);
}

async function insertKeys(sql: Sql, orgId: string, name: string, keys: NewDkimKey[], nowMs: number): Promise<void> {
  for (const k of keys)
    await sql`INSERT INTO dkim_keys (org_id, domain, selector, algorithm, public_key, sealed_key, state, created_ms, changed_ms)
      VALUES (${orgId}, ${name}, ${k.selector}, ${k.algorithm}, ${k.publicKey}, ${k.sealedKey}, ${k.state}, ${nowMs}, ${nowMs})
      ON CONFLICT (org_id, domain, selector) DO NOTHING`;
}
