import { randomBytes } from "node:crypto";
import type { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type Db, isUniqueViolation, num, RecordError } from "./db";

// The console's accounts: users (one organization each, signing in by email with an argon2id
// password hash), their sessions (by the SHA-256 of the session token, with the session's CSRF
// token) and the log of failed sign-ins that throttling reads.

export interface ConsoleUser {
  id: string;
  orgId: string;
  email: string;
  passwordHash: string;
}

/** A live session and whose it is. */
export interface ConsoleSession {
  userId: string;
  email: string;
  orgId: string;
  orgSlug: string;
  plan: Plan;
  csrf: string;
  expiresMs: number;
}

/** Failed sign-ins of one subject (an address, an account) since a time. */
export interface Failures {
  count: number;
  /** The oldest of them; 0 when there is none. */
  oldestMs: number;
}

export class ConsoleRecords {
  constructor(private readonly db: Db) {}

  /** Adds a user to an organization; the email (already normalised) signs in to one organization only. */
  async createUser(
    slug: string,
    email: string,
    passwordHash: string,
    nowMs: number,
  ): Promise<{ userId: string; orgId: string }> {
    const userId = `usr_${randomBytes(8).toString("hex")}`;
    try {
      return await this.db.tx(async (sql) => {
        const [org] = await sql`SELECT id FROM organizations WHERE slug = ${slug}`;
        if (!org) throw new RecordError("not_found", `no organization ${slug}`);
        await sql`INSERT INTO console_users (id, org_id, email, password_hash, created_ms) VALUES (${userId}, ${org.id}, ${email}, ${passwordHash}, ${nowMs})`;
        return { userId, orgId: org.id as string };
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new RecordError("already_exists", `a console user ${email} already exists`);
      throw err;
    }
  }

  async userByEmail(email: string): Promise<ConsoleUser | undefined> {
    const [row] = await this.db.run(
      (sql) => sql`SELECT id, org_id, email, password_hash FROM console_users WHERE email = ${email}`,
    );
    return row ? { id: row.id, orgId: row.org_id, email: row.email, passwordHash: row.password_hash } : undefined;
  }

  /** Stores a new session (by its token's hash) and drops every expired one. */
  async createSession(hash: string, userId: string, csrf: string, nowMs: number, expiresMs: number): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql`DELETE FROM console_sessions WHERE expires_ms <= ${nowMs}`;
      await sql`INSERT INTO console_sessions (hash, user_id, csrf, created_ms, expires_ms) VALUES (${hash}, ${userId}, ${csrf}, ${nowMs}, ${expiresMs})`;
    });
  }

  /** The session of a token hash; undefined when there is none or it has expired. */
  async session(hash: string, nowMs: number): Promise<ConsoleSession | undefined> {
    const [row] = await this.db.run(
      (sql) => sql`SELECT s.user_id, s.csrf, s.expires_ms, u.email, u.org_id, o.slug, o.plan
        FROM console_sessions s JOIN console_users u ON u.id = s.user_id JOIN organizations o ON o.id = u.org_id
        WHERE s.hash = ${hash} AND s.expires_ms > ${nowMs}`,
    );
    if (!row) return undefined;
    return {
      userId: row.user_id,
      email: row.email,
      orgId: row.org_id,
      orgSlug: row.slug,
      plan: num(row.plan) as Plan,
      csrf: row.csrf,
      expiresMs: num(row.expires_ms),
    };
  }

  async deleteSession(hash: string): Promise<void> {
    await this.db.run((sql) => sql`DELETE FROM console_sessions WHERE hash = ${hash}`);
  }

  /** Each subject's failed sign-ins since sinceMs. */
  async failuresSince(subjects: string[], sinceMs: number): Promise<Map<string, Failures>> {
    const out = new Map<string, Failures>(subjects.map((s) => [s, { count: 0, oldestMs: 0 }]));
    const rows = await this.db.run(
      (sql) => sql`SELECT subject, COUNT(*) AS n, MIN(at_ms) AS oldest FROM console_signin_failures
        WHERE subject IN ${sql(subjects)} AND at_ms > ${sinceMs} GROUP BY subject`,
    );
    for (const r of rows as { subject: string; n: unknown; oldest: unknown }[])
      out.set(r.subject, { count: num(r.n), oldestMs: num(r.oldest) });
    return out;
  }

  /** Logs a failed sign-in against each subject, and forgets every failure from before forgetBeforeMs. */
  async recordFailure(subjects: string[], nowMs: number, forgetBeforeMs: number): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql`DELETE FROM console_signin_failures WHERE at_ms <= ${forgetBeforeMs}`;
      await sql`INSERT INTO console_signin_failures ${sql(subjects.map((subject) => ({ subject, at_ms: nowMs })))}`;
    });
  }

  /** Forgets a subject's failures (an account after a successful sign-in). */
  async clearFailures(subject: string): Promise<void> {
    await this.db.run((sql) => sql`DELETE FROM console_signin_failures WHERE subject = ${subject}`);
  }
}
