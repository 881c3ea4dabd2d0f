// One data layer, two databases, one suite: every test here runs on a SQLite file and on a
// PostgreSQL server this file starts (initdb + postgres in a temporary directory).
import { describe, expect, test } from "bun:test";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { recordDatabases } from "../testkit/recorddbs";
import { runToEnd, tempDir } from "../testkit/testkit";
import { Db } from "./db";
import type { MessageHistory } from "../model/history";
import { MIGRATIONS, MigrationError, migrate } from "./migrations";
import { SESSION_TOUCH_MS } from "./console";
import { Records } from "./records";

const databases = recordDatabases("records");

const T0 = Date.UTC(2026, 10, 1);
/** A console session's idle timeout in these tests. */
const IDLE = 30 * 60_000;

function message(over: Partial<MessageHistory> = {}): MessageHistory {
  return {
    id: `msg_${Math.random().toString(16).slice(2)}`,
    orgId: "org_a",
    lane: Lane.TRANSACTIONAL,
    from: "A <a@a.example>",
    to: "b@example.org",
    toMailbox: "b@example.org",
    subject: "Hello",
    tags: [],
    status: MessageStatus.QUEUED,
    attempts: 0,
    createdMs: T0,
    updatedMs: T0,
    version: 1,
    events: [{ status: MessageStatus.QUEUED, atMs: T0, detail: "accepted" }],
    deliveryAttempts: [],
    ...over,
  };
}

/** A message as the records read it back for the API: without the payload. */
function noPayloadOf(m: MessageHistory): MessageHistory {
  const { payload: _, ...rest } = m;
  return rest;
}

for (const [name, fresh] of databases) {
  describe(`records: ${name}`, () => {
    async function open(): Promise<Records> {
      const where = await fresh();
      return Records.open({ databaseUrl: where.url, sqliteFile: where.sqliteFile });
    }

    test("migrations: a new database goes to the latest version; again, nothing to do; a newer database is refused", async () => {
      const where = await fresh();
      const db = await Db.open({ url: where.url, sqliteFile: where.sqliteFile });
      const latest = MIGRATIONS.at(-1)!.version;
      expect(await migrate(db)).toEqual({ applied: MIGRATIONS.map((m) => m.version), version: latest });
      expect(await migrate(db)).toEqual({ applied: [], version: latest });
      await db.run(
        (sql) =>
          sql`INSERT INTO schema_migrations (version, name, applied_ms) VALUES (${latest + 1}, 'from the future', 0)`,
      );
      await expect(migrate(db)).rejects.toBeInstanceOf(MigrationError);
      await db.close();
    });

    test("migrations: a database at an older version upgrades, keeping its rows", async () => {
      const where = await fresh();
      // Version 2: before the console's migration, whose backfill of verification values is checked.
      const previous = 2;
      const db = await Db.open({ url: where.url, sqliteFile: where.sqliteFile });
      expect((await migrate(db, { upTo: previous })).version).toBe(previous);
      await db.run(
        (sql) =>
          sql`INSERT INTO organizations (id, slug, plan, version, created_ms) VALUES ('org_old', 'old', 2, 1, 0)`,
      );
      await db.run(
        (sql) =>
          sql`INSERT INTO sending_domains (org_id, name, verified, created_ms) VALUES ('org_old', 'old.example', 0, 0)`,
      );
      await db.close();
      // The daemon's start: open applies what is pending.
      const records = await Records.open({ databaseUrl: where.url, sqliteFile: where.sqliteFile });
      expect(await records.directory.getOrganization("old")).toEqual({
        id: "org_old",
        slug: "old",
        plan: Plan.PREMIUM,
        domains: [{ name: "old.example", verified: false }],
      });
      // A domain added before the console got a verification value of its own.
      expect((await records.domains.list("org_old"))[0]!.verifyValue).toMatch(/^[0-9a-f]{32}$/);
      // And, for the domains API, an id of its own; no key yet (its first are made at its first message).
      expect((await records.domains.byName("org_old", "old.example"))!.id).toMatch(/^dom_[0-9a-f]{24}$/);
      expect(await records.domains.keys("org_old", "old.example")).toEqual([]);
      await records.history.write([message({ orgId: "org_old" })]);
      const versions = await records.db.run((sql) => sql`SELECT version FROM schema_migrations ORDER BY version`);
      expect(versions.map((r: { version: unknown }) => Number(r.version))).toEqual(MIGRATIONS.map((m) => m.version));
      await records.close();
    });

    test("migrations: a database that has a later version but misses an earlier one gets the missing one", async () => {
      const where = await fresh();
      const db = await Db.open({ url: where.url, sqliteFile: where.sqliteFile });
      const missing = 3; // the audience, released after version 4 had been applied in places
      await migrate(db, { migrations: MIGRATIONS.filter((m) => m.version !== missing) });
      await db.run(
        (sql) =>
          sql`INSERT INTO organizations (id, slug, plan, version, created_ms) VALUES ('org_gap', 'gap', 1, 1, 0)`,
      );
      await db.close();
      const records = await Records.open({ databaseUrl: where.url, sqliteFile: where.sqliteFile });
      const versions = await records.db.run((sql) => sql`SELECT version FROM schema_migrations ORDER BY version`);
      expect(versions.map((r: { version: unknown }) => Number(r.version))).toEqual(MIGRATIONS.map((m) => m.version));
      expect(
        (await records.audience.upsert("org_gap", { email: "a@gap.example", triggerWorkflows: true }, T0)).result,
      ).toBe("created");
      await records.close();
    });

    test("migrations: several processes migrating at once (admin migrate) migrate once", async () => {
      const where = await fresh();
      const env: Record<string, string> = where.url
        ? { DATABASE_URL: where.url }
        : { DATA_DIR: tempDir("mailcore-migrate-") };
      const runs = await Promise.all([1, 2, 3].map(() => runToEnd("cmd/admin/index.ts", ["migrate"], env)));
      expect(runs.map((r) => r.code)).toEqual([0, 0, 0]);
      const latest = MIGRATIONS.at(-1)!.version;
      const lines = runs.map((r) => r.stdout.trim()).sort();
      expect(lines).toEqual([
        `applied ${MIGRATIONS.map((m) => m.version).join(", ")}: records at version ${latest}`,
        `records at version ${latest}: nothing to apply`,
        `records at version ${latest}: nothing to apply`,
      ]);
    });

    test("organizations: create, plan changes raise the version, domains, errors", async () => {
      const r = await open();
      const p = await r.directory.createOrganization("acme", Plan.FREE, T0);
      expect(p).toMatchObject({ slug: "acme", plan: Plan.FREE, version: 1, verifiedDomains: [] });
      expect(p.id).toMatch(/^org_[0-9a-f]{16}$/);
      await expect(r.directory.createOrganization("acme", Plan.PREMIUM, T0)).rejects.toMatchObject({
        kind: "already_exists",
      });
      const upgraded = await r.directory.setPlan("acme", Plan.ENTERPRISE);
      expect(upgraded).toEqual({ id: p.id, slug: "acme", plan: Plan.ENTERPRISE, version: 2, verifiedDomains: [] });
      const { organization, projection } = await r.directory.addDomain("acme", "b.example", true, T0);
      expect(organization.domains).toEqual([{ name: "b.example", verified: true }]);
      expect(projection).toMatchObject({ version: 3, verifiedDomains: ["b.example"] });
      await r.directory.addDomain("acme", "a.example", false, T0);
      const again = await r.directory.addDomain("acme", "b.example", false, T0);
      expect(again.organization.domains).toEqual([
        { name: "a.example", verified: false },
        { name: "b.example", verified: false },
      ]);
      expect(again.projection).toMatchObject({ version: 5, verifiedDomains: [] });
      expect(await r.directory.orgProjection(p.id)).toEqual(again.projection);
      expect(await r.directory.orgProjection("org_none")).toBeUndefined();
      for (const op of [
        () => r.directory.getOrganization("none"),
        () => r.directory.setPlan("none", Plan.FREE),
        () => r.directory.addDomain("none", "x.example", true, T0),
      ]) {
        await expect(op()).rejects.toMatchObject({ kind: "not_found" });
      }
      expect(await r.audience.tagCounts([p.id])).toEqual(new Map([[p.id, []]]));
      await r.close();
    });

    test("provisioning: organizations with domains and tokens in one go; a taken slug is reported, unchanged", async () => {
      const r = await open();
      const before = await r.directory.createOrganization("prov-old", Plan.ENTERPRISE, T0);
      const done = await r.directory.provisionOrganizations(
        [
          {
            slug: "prov-a",
            plan: Plan.PREMIUM,
            domains: [
              { name: "z.prov.example", verified: false },
              { name: "a.prov.example", verified: true },
            ],
            token: { hash: "prov-hash", name: "ci" },
          },
          { slug: "prov-old", plan: Plan.FREE, domains: [{ name: "old.example", verified: true }] },
          ...Array.from({ length: 600 }, (_, i) => ({ slug: `prov-${i}`, plan: Plan.FREE, domains: [] })),
        ],
        T0,
      );
      const [a, old] = done;
      if (!a!.created) throw new Error("prov-a was not created");
      expect(a!.organization.domains).toEqual([
        { name: "a.prov.example", verified: true },
        { name: "z.prov.example", verified: false },
      ]);
      expect(a!.projection).toEqual({
        id: a!.organization.id,
        slug: "prov-a",
        plan: Plan.PREMIUM,
        version: 1,
        verifiedDomains: ["a.prov.example"],
      });
      expect(await r.directory.orgProjection(a!.organization.id)).toEqual(a!.projection);
      expect(await r.directory.getOrganization("prov-a")).toEqual(a!.organization);
      expect(await r.directory.tokenOwners(["prov-hash"])).toEqual(new Map([["prov-hash", a!.organization.id]]));
      expect(a!.tokenId).toMatch(/^tok_[0-9a-f]{16}$/);
      expect((await r.directory.listTokens(a!.organization.id)).map((t) => [t.id, t.name])).toEqual([
        [a!.tokenId!, "ci"],
      ]);
      expect(old).toEqual({
        created: false,
        organization: { id: before.id, slug: "prov-old", plan: Plan.ENTERPRISE, domains: [] },
      });
      expect(done.filter((d) => d.created)).toHaveLength(601);
      // Again: every slug is taken now, and reported with what it has.
      const again = await r.directory.provisionOrganizations([{ slug: "prov-a", plan: Plan.FREE, domains: [] }], T0);
      expect(again).toEqual([{ created: false, organization: a!.organization }]);
      await r.close();
    });

    test("tokens: hashes only, owners, revocation (twice is fine), coarse last use", async () => {
      const r = await open();
      const org = await r.directory.createOrganization("tok", Plan.PREMIUM, T0);
      const made = await r.directory.createToken("tok", "hash-1", "ci deploys", T0);
      expect(made.orgId).toBe(org.id);
      expect(made.tokenId).toMatch(/^tok_[0-9a-f]{16}$/);
      await r.directory.createToken("tok", "hash-2", "default", T0 + 1);
      await expect(r.directory.createToken("none", "hash-3", "x", T0)).rejects.toMatchObject({ kind: "not_found" });
      expect(await r.directory.tokenOwners(["hash-1", "hash-2", "hash-x"])).toEqual(
        new Map([
          ["hash-1", org.id],
          ["hash-2", org.id],
        ]),
      );
      expect(await r.directory.revokeToken("hash-1", T0 + 10)).toBe(org.id);
      expect(await r.directory.revokeToken("hash-1", T0 + 20)).toBe(org.id);
      await expect(r.directory.revokeToken("hash-x", T0)).rejects.toMatchObject({ kind: "not_found" });
      expect((await r.directory.tokenOwners(["hash-1"])).get("hash-1")).toBeNull();

      await r.directory.touchTokens(["hash-2"], T0 + 60_000, 60_000);
      await r.directory.touchTokens(["hash-2"], T0 + 90_000, 60_000); // within the resolution: unchanged
      const tokens = await r.directory.listTokens(org.id);
      expect(tokens.map((t) => [t.name, t.createdMs, t.lastUsedMs, t.revokedMs])).toEqual([
        ["ci deploys", T0, null, T0 + 10],
        ["default", T0 + 1, T0 + 60_000, null],
      ]);
      await r.directory.touchTokens(["hash-2"], T0 + 120_000, 60_000);
      expect((await r.directory.listTokens(org.id))[1]!.lastUsedMs).toBe(T0 + 120_000);
      await r.close();
    });

    test("tokens by id: revoked within their organization only", async () => {
      const r = await open();
      const a = await r.directory.createOrganization("tid-a", Plan.FREE, T0);
      await r.directory.createOrganization("tid-b", Plan.FREE, T0);
      const { tokenId } = await r.directory.createToken("tid-a", "hash-a", "a", T0);
      await expect(
        r.directory.revokeTokenById((await r.directory.getOrganization("tid-b")).id, tokenId, T0),
      ).rejects.toMatchObject({ kind: "not_found" });
      expect((await r.directory.tokenOwners(["hash-a"])).get("hash-a")).toBe(a.id);
      expect(await r.directory.revokeTokenById(a.id, tokenId, T0 + 5)).toBe("hash-a");
      expect(await r.directory.revokeTokenById(a.id, tokenId, T0 + 9)).toBe("hash-a");
      expect((await r.directory.listTokens(a.id))[0]!.revokedMs).toBe(T0 + 5);
      await r.close();
    });

    test("sending domains: verification values, added once, verified raises the projection's version", async () => {
      const r = await open();
      const org = await r.directory.createOrganization("dom", Plan.FREE, T0);
      const other = await r.directory.createOrganization("dom-other", Plan.FREE, T0);
      const add = (orgId: string, id: string) =>
        r.domains.add({ id, orgId, name: "mail.dom.example", verifyValue: id, keys: [], nowMs: T0 });
      const added = await add(org.id, "dom_1");
      expect(added).toMatchObject({ name: "mail.dom.example", verified: false, verifyValue: "dom_1" });
      await expect(add(org.id, "dom_2")).rejects.toMatchObject({ kind: "already_exists" });
      // Another organization may claim the same name while nobody has verified it.
      expect((await add(other.id, "dom_3")).verifyValue).toBe("dom_3");
      await r.directory.addDomain("dom", "cli.dom.example", true, T0);
      const listed = await r.domains.list(org.id);
      expect(listed.map((d) => [d.name, d.verified])).toEqual([
        ["cli.dom.example", true],
        ["mail.dom.example", false],
      ]);
      expect(listed[0]!.verifyValue).toMatch(/^[0-9a-f]{32}$/);
      expect(listed[0]!.id).toMatch(/^dom_[0-9a-f]{24}$/);
      const before = (await r.directory.orgProjection(org.id))!.version;
      const p = await r.directory.markDomainVerified(org.id, "mail.dom.example");
      expect(p).toMatchObject({ version: before + 1, verifiedDomains: ["cli.dom.example", "mail.dom.example"] });
      expect((await r.domains.list(other.id))[0]!.verified).toBe(false);
      // Verified here, it cannot be verified by the other organization too.
      await expect(r.directory.markDomainVerified(other.id, "mail.dom.example")).rejects.toMatchObject({
        kind: "already_exists",
      });
      await expect(r.directory.markDomainVerified(other.id, "none.example")).rejects.toMatchObject({
        kind: "not_found",
      });
      await r.close();
    });

    test("console: users, sessions (expiry, idle time, per organization)", async () => {
      const r = await open();
      const org = await r.directory.createOrganization("con", Plan.PREMIUM, T0);
      const made = await r.console.createUser("con", "ann@con.example", "$argon2id$hash", T0);
      expect(made).toEqual({ userId: expect.stringMatching(/^usr_[0-9a-f]{16}$/), orgId: org.id });
      await expect(r.console.createUser("con", "ann@con.example", "x", T0)).rejects.toMatchObject({
        kind: "already_exists",
      });
      await expect(r.console.createUser("none", "bob@con.example", "x", T0)).rejects.toMatchObject({
        kind: "not_found",
      });
      expect(await r.console.userByEmail("ann@con.example")).toEqual({
        id: made.userId,
        orgId: org.id,
        email: "ann@con.example",
        passwordHash: "$argon2id$hash",
      });
      expect(await r.console.userByEmail("nobody@con.example")).toBeUndefined();

      await r.console.createSession("s-old", made.userId, "csrf-old", T0, T0 + 1_000);
      await r.console.createSession("s-1", made.userId, "csrf-1", T0 + 500, T0 + 10_000);
      expect(await r.console.session("s-1", T0 + 600, IDLE)).toEqual({
        userId: made.userId,
        email: "ann@con.example",
        orgId: org.id,
        orgSlug: "con",
        plan: Plan.PREMIUM,
        csrf: "csrf-1",
        expiresMs: T0 + 10_000,
      });
      expect(await r.console.session("s-1", T0 + 10_000, IDLE)).toBeUndefined();
      expect(await r.console.session("s-old", T0 + 1_000, IDLE)).toBeUndefined();
      // A new session drops the expired ones.
      await r.console.createSession("s-2", made.userId, "csrf-2", T0 + 2_000, T0 + 20_000);
      const [{ n }] = await r.db.run((sql) => sql`SELECT COUNT(*) AS n FROM console_sessions`);
      expect(Number(n)).toBe(2);
      await r.console.deleteSession("s-2");
      expect(await r.console.session("s-2", T0 + 2_001, IDLE)).toBeUndefined();

      // Unused for the idle time, a session has ended; each use moves its last use on (once a minute at most).
      await r.console.createSession("s-idle", made.userId, "csrf-3", T0, T0 + 10 * IDLE);
      expect(await r.console.session("s-idle", T0 + IDLE - 1, IDLE)).toBeDefined();
      expect(await r.console.session("s-idle", T0 + 2 * IDLE - 2, IDLE)).toBeDefined();
      expect(await r.console.session("s-idle", T0 + 3 * IDLE - 2, IDLE)).toBeUndefined();
      await r.console.createSession("s-seen", made.userId, "csrf-4", T0, T0 + 10 * IDLE);
      expect(await r.console.session("s-seen", T0 + SESSION_TOUCH_MS - 1, IDLE)).toBeDefined();
      // Not written then (under a minute since its last use): its idle time still counts from T0.
      expect(await r.console.session("s-seen", T0 + IDLE, IDLE)).toBeUndefined();
      await r.close();
    });

    test("console: a sign-in is charged before its check, refused at a limit, and a success takes its charge back", async () => {
      const r = await open();
      const W = 60_000;
      const limits = (ip: string, acct: string) => [
        { subject: `ip:${ip}`, max: 3 },
        { subject: `pair:${ip}|${acct}`, max: 2 },
      ];
      const first = await r.console.chargeSignIn(limits("10.0.0.1", "ann"), T0, W);
      expect(first).toEqual({ charged: true, charge: expect.any(String) });
      expect(await r.console.chargeSignIn(limits("10.0.0.1", "ann"), T0 + 10, W)).toMatchObject({ charged: true });
      // The pair has its two: refused until the first of them leaves the window, and nothing charged.
      expect(await r.console.chargeSignIn(limits("10.0.0.1", "ann"), T0 + 20, W)).toEqual({
        charged: false,
        waitMs: W - 20,
      });
      // The same address with another account: its third, the address's last.
      const bob = await r.console.chargeSignIn(limits("10.0.0.1", "bob"), T0 + 30, W);
      expect(bob).toMatchObject({ charged: true });
      expect(await r.console.chargeSignIn(limits("10.0.0.1", "eve"), T0 + 40, W)).toEqual({
        charged: false,
        waitMs: W - 40,
      });
      // Another address is not held back by this one, with the same account.
      expect(await r.console.chargeSignIn(limits("10.0.0.2", "ann"), T0 + 50, W)).toMatchObject({ charged: true });
      // Bob's sign-in succeeded: its charge is given back, and the address has room again.
      await r.console.refundSignIn((bob as { charge: string }).charge, "pair:10.0.0.1|bob");
      expect(await r.console.chargeSignIn(limits("10.0.0.1", "eve"), T0 + 60, W)).toMatchObject({ charged: true });
      // Past the window the first failures are forgotten.
      expect(await r.console.chargeSignIn(limits("10.0.0.1", "ann"), T0 + W + 10, W)).toMatchObject({
        charged: true,
      });
      // Attempts sent together are charged one by one: no more pass than the limit.
      const together = await Promise.all(
        Array.from({ length: 12 }, () => r.console.chargeSignIn(limits("10.0.0.9", "zed"), T0, W)),
      );
      expect(together.filter((c) => c.charged).length).toBe(2);
      await r.close();
    });

    test("message history: write, read back, never overwritten by an older copy, events once", async () => {
      const r = await open();
      const m = message();
      await r.history.write([m]);
      expect(await r.history.get("org_a", m.id)).toEqual(m);
      expect(await r.history.get("org_b", m.id)).toBeNull();
      const delivered: MessageHistory = {
        ...m,
        status: MessageStatus.DELIVERED,
        attempts: 1,
        updatedMs: T0 + 5,
        version: 4,
        events: [
          ...m.events,
          { status: MessageStatus.QUEUED, atMs: T0 + 1, detail: "released" },
          { status: MessageStatus.SENDING, atMs: T0 + 2, detail: "attempt 1" },
          { status: MessageStatus.DELIVERED, atMs: T0 + 5, detail: "250 ok | queued" },
        ],
        deliveryAttempts: [
          {
            atMs: T0 + 3,
            host: "mx1.example.org",
            address: "192.0.2.1",
            tls: "none",
            stage: "connect",
            reply: "connect ECONNREFUSED 192.0.2.1:25",
            enhancedCode: "",
          },
          {
            atMs: T0 + 4,
            host: "mx2.example.org",
            address: "192.0.2.2",
            tls: "unverified",
            stage: "data",
            reply: "250 2.0.0 ok | queued",
            enhancedCode: "2.0.0",
          },
        ],
      };
      await r.history.write([delivered]);
      await r.history.write([m]); // an older copy, written late by a second writer
      await r.history.write([delivered]); // the same again
      expect(await r.history.get("org_a", m.id)).toEqual(delivered);
      await r.close();
    });

    test("message history: the payload is kept while the message is not final, and walked by id", async () => {
      const r = await open();
      const ids = ["msg_1", "msg_2", "msg_3", "msg_4"];
      const [a, b, c, d] = ids.map((id) => message({ id, payload: `{"body":"${id}"}` })) as [
        MessageHistory,
        MessageHistory,
        MessageHistory,
        MessageHistory,
      ];
      await r.history.write([a, b, c, noPayloadOf(d)]);
      // A later change without the payload keeps it; a final one drops it.
      const sending = { ...a, payload: undefined, status: MessageStatus.SENDING, version: 3 };
      const delivered = { ...b, status: MessageStatus.DELIVERED, version: 4 };
      await r.history.write([sending, delivered]);
      expect(await r.history.unfinishedAfter("", 10)).toEqual([
        { orgId: "org_a", id: "msg_1" },
        { orgId: "org_a", id: "msg_3" },
      ]);
      expect(await r.history.unfinishedAfter("msg_1", 1)).toEqual([{ orgId: "org_a", id: "msg_3" }]);
      expect(await r.history.unfinishedAfter("msg_3", 10)).toEqual([]);
      const back = await r.history.unfinished(ids);
      expect(back.map((m) => [m.id, m.status, m.payload])).toEqual([
        ["msg_1", MessageStatus.SENDING, '{"body":"msg_1"}'],
        ["msg_3", MessageStatus.QUEUED, '{"body":"msg_3"}'],
      ]);
      expect(back[0]!.events).toEqual(a.events);
      // What the API reads never carries the payload.
      expect(await r.history.get("org_a", "msg_3")).toEqual(noPayloadOf(c));
      const [{ n }] = await r.db.run((sql) => sql`SELECT COUNT(*) AS n FROM messages WHERE payload IS NOT NULL`);
      expect(Number(n)).toBe(2);
      await r.close();
    });

    test("message history: many at once, and expired finished messages deleted in batches", async () => {
      const r = await open();
      const finished = Array.from({ length: 1_200 }, (_, i) =>
        message({
          status: MessageStatus.DELIVERED,
          updatedMs: T0 + i,
          events: [{ status: MessageStatus.DELIVERED, atMs: T0 + i, detail: `d${i}` }],
        }),
      );
      const waiting = message({ updatedMs: T0 });
      const tried = (atMs: number) => [
        {
          atMs,
          host: "mx.example.org",
          address: "192.0.2.1",
          tls: "none",
          stage: "rcpt",
          reply: "550 5.1.1 no",
          enhancedCode: "5.1.1",
        },
      ];
      for (const m of finished) m.deliveryAttempts = tried(m.updatedMs);
      const recent = message({
        status: MessageStatus.BOUNCED,
        updatedMs: T0 + 10_000,
        deliveryAttempts: tried(T0 + 10_000),
      });
      await r.history.write([...finished, waiting, recent]);
      expect(await r.history.deleteFinishedBefore(T0 + 5_000, 1_000)).toBe(1_000);
      expect(await r.history.deleteFinishedBefore(T0 + 5_000, 1_000)).toBe(200);
      expect(await r.history.deleteFinishedBefore(T0 + 5_000, 1_000)).toBe(0);
      expect(await r.history.get("org_a", finished[1_199]!.id)).toBeNull();
      expect(await r.history.get("org_a", waiting.id)).not.toBeNull();
      expect(await r.history.get("org_a", recent.id)).not.toBeNull();
      const [{ n }] = await r.db.run((sql) => sql`SELECT COUNT(*) AS n FROM message_events`);
      expect(Number(n)).toBe(2);
      const [{ tries }] = await r.db.run((sql) => sql`SELECT COUNT(*) AS tries FROM message_attempts`);
      expect(Number(tries)).toBe(1); // the recent one's
      await r.close();
    });
  });
}
