// The two databases every records suite runs on: a SQLite file, and a PostgreSQL server of the
// test file's own (started before its tests, stopped after them).
import { afterAll, beforeAll } from "bun:test";
import { join } from "node:path";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Records } from "../records/records";
import { type PostgresServer, startPostgres } from "./postgres";
import { tempDir } from "./testkit";

/** A fresh, empty database of one kind: its connection options. */
export type FreshDatabase = () => Promise<{ url?: string; sqliteFile: string }>;

export function recordDatabases(name: string): [string, FreshDatabase][] {
  let pg: PostgresServer | undefined;
  const dir = tempDir(`mailcore-${name}-`);
  let files = 0;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 30_000); // initdb on a busy machine
  afterAll(async () => {
    await pg?.stop();
  });
  return [
    ["sqlite", async () => ({ sqliteFile: join(dir, `${name}-${++files}.db`) })],
    ["postgres", async () => ({ url: await pg!.newDatabase(), sqliteFile: "" })],
  ];
}

/**
 * The records on a fresh database with two organizations: `slug` (enterprise), the one a suite
 * works in, and `slug-other` (free), the one that must never see its data; where, its connection options.
 */
export async function recordsWithTwoOrgs(
  fresh: FreshDatabase,
  slug: string,
  nowMs: number,
): Promise<{ r: Records; org: string; other: string; where: Awaited<ReturnType<FreshDatabase>> }> {
  const where = await fresh();
  const r = await Records.open({ databaseUrl: where.url, sqliteFile: where.sqliteFile });
  const org = (await r.directory.createOrganization(slug, Plan.ENTERPRISE, nowMs)).id;
  const other = (await r.directory.createOrganization(`${slug}-other`, Plan.FREE, nowMs)).id;
  return { r, org, other, where };
}
