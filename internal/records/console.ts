import { randomBytes } from "node:crypto";
import type { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type Db, isUniqueViolation, num, RecordError } from "./db";

// The console's accounts: users (one organization each, signing in by email with an argon2id
// password hash), their sessions (by the SHA-256 of the session token, with the session's CSRF
// token, and when it was last used) and the log of sign-in attempts that throttling reads.

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

/** A subject a sign-in attempt is charged to (an address, an address with an account) and the failures it may have within the window. */
export interface SignInCharge {
  subject: string;
  max: number;
}

/** A charged attempt (with the id that gives it back), or a refusal with the time until there is room. */
export type ChargeResult = { charged: true; charge: string } | { charged: false; waitMs: number };

/** A session's last use is written when it is older than this: an idle timeout is exact to within it. */
export const SESSION_TOUCH_MS = 60_000;

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

  /** Stores a new session (by its token's hash), last used now, and drops every expired one. */
  async createSession(hash: string, userId: string, csrf: string, nowMs: number, expiresMs: number): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql`DELETE FROM console_sessions WHERE expires_ms <= ${nowMs}`;
      await sql`INSERT INTO console_sessions (hash, user_id, csrf, created_ms, expires_ms, last_seen_ms) VALUES (${hash}, ${userId}, ${csrf}, ${nowMs}, ${expiresMs}, ${nowMs})`;
    });
  }

  /**
   * The session of a token hash, used now; undefined when there is none, it has expired, or it
   * has not been used for idleMs. Its last use is written at most once a SESSION_TOUCH_MS, so
   * that reading pages is not a write each.
   */
  async session(hash: string, nowMs: number, idleMs: number): Promise<ConsoleSession | undefined> {
    const [row] = await this.db.run(
      (sql) => sql`SELECT s.user_id, s.csrf, s.expires_ms, s.last_seen_ms, u.email, u.org_id, o.slug, o.plan
        FROM console_sessions s JOIN console_users u ON u.id = s.user_id JOIN organizations o ON o.id = u.org_id
        WHERE s.hash = ${hash} AND s.expires_ms > ${nowMs} AND s.last_seen_ms > ${nowMs - idleMs}`,
    );
    if (!row) return undefined;
    if (num(row.last_seen_ms) <= nowMs - SESSION_TOUCH_MS)
      await this.db.run((sql) => sql`UPDATE console_sessions SET last_seen_ms = ${nowMs} WHERE hash = ${hash}`);
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

  /**
   * Charges a sign-in attempt to each subject before its password is checked, in one step: when
   * any subject already has its most failures within the window, nothing is charged and the
   * answer is how long until it has room again; otherwise every subject is charged one failure
   * now, under a charge id that a successful sign-in gives back (refundSignIn). Attempts that
   * arrive together are charged one after the other (PostgreSQL: a transaction lock per
   * subject; SQLite: one writer), so no more of them pass than the limits allow.
   */
  async chargeSignIn(charges: SignInCharge[], nowMs: number, windowMs: number): Promise<ChargeResult> {
    const subjects = charges.map((c) => c.subject);
    return this.db.tx(async (sql) => {
      if (this.db.dialect === "postgres")
        for (const subject of [...subjects].sort()) await sql`SELECT pg_advisory_xact_lock(hashtext(${subject}))`;
      await sql`DELETE FROM console_signin_failures WHERE at_ms <= ${nowMs - windowMs}`;
      const rows = (await sql`SELECT subject, at_ms FROM console_signin_failures
        WHERE subject IN ${sql(subjects)} ORDER BY at_ms`) as { subject: string; at_ms: unknown }[];
      let waitMs = 0;
      for (const { subject, max } of charges) {
        const times = rows.filter((r) => r.subject === subject).map((r) => num(r.at_ms));
        // Room again when the failure that makes the count reach max leaves the window.
        if (times.length >= max) waitMs = Math.max(waitMs, times[times.length - max]! + windowMs - nowMs);
      }
      if (waitMs > 0) return { charged: false, waitMs };
      const charge = randomBytes(9).toString("base64url");
      await sql`INSERT INTO console_signin_failures ${sql(subjects.map((subject) => ({ subject, at_ms: nowMs, charge })))}`;
      return { charged: true, charge };
    });
  }

  /** A sign-in that succeeded: its own charge given back, and the failures of `forget` (its address and account) forgotten. */
  async refundSignIn(charge: string, forget: string): Promise<void> {
    await this.db.run(
      (sql) => sql`DELETE FROM console_signin_failures WHERE charge = ${charge} OR subject = ${forget}`,
    );
  }
}
