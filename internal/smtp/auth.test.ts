// AUTH as the front decides it: what is logged of a username, the daemon's verdict, and where a
// session counts once its token is good.
import { expect, test } from "bun:test";
import type { SMTPServerSession } from "smtp-server";
import { SMTP_OPTIONS, smtpDeps, smtpSession } from "../testkit/smtpfront";
import { authenticate, logLabel, verdictOf } from "./auth";
import { type SmtpDeps, SubmissionFront } from "./front";

const TOKEN = `mc_${"a".repeat(43)}`;

test("a username is only a label: bounded, and hidden when it looks like a token", () => {
  expect(logLabel("acme")).toBe("acme");
  expect(logLabel("x".repeat(100))).toHaveLength(64);
  expect(logLabel(TOKEN)).toBe("[token-like username hidden]");
});

test("the daemon's answer as the reply rules read it", () => {
  expect(verdictOf({ valid: true, orgId: "org_1", orgSlug: "acme" })).toEqual({ valid: true });
  expect(verdictOf({ valid: false })).toEqual({ valid: false });
  expect(verdictOf({ unavailable: true })).toEqual({ unavailable: true });
});

/** AUTH with the token as the password on a session that holds its address's slot; the error, or null. */
function auth(front: SubmissionFront, session: SMTPServerSession) {
  const s = front.state(session);
  Object.assign(s, { ip: "192.0.2.7", slot: "address" });
  return new Promise<(Error & { responseCode?: number }) | null>((resolve) =>
    authenticate(
      front,
      { method: "PLAIN", username: "acme", password: TOKEN, validatePassword: () => false },
      session,
      (err) => resolve(err ?? null),
    ),
  );
}

const valid: SmtpDeps["verifyToken"] = async () => ({ valid: true, orgId: "org_1", orgSlug: "acme" });

test("a good token: the session counts for its organization, no longer for its address", async () => {
  const front = new SubmissionFront(smtpDeps({ verifyToken: valid }), SMTP_OPTIONS, () => []);
  const session = smtpSession();
  expect(await auth(front, session)).toBeNull();
  expect(front.state(session)).toMatchObject({ slot: "organization", orgId: "org_1", orgSlug: "acme", token: TOKEN });
});

test("a good token of an organization that holds its sessions: 421, and the session stays its address's", async () => {
  const front = new SubmissionFront(
    smtpDeps({ verifyToken: valid }),
    { ...SMTP_OPTIONS, maxSessionsPerOrg: 1 },
    () => [],
  );
  expect(await auth(front, smtpSession({ id: "first" }))).toBeNull();
  const second = smtpSession({ id: "second" });
  const err = await auth(front, second);
  expect(err?.responseCode).toBe(421);
  expect(front.state(second).slot).toBe("address");
  expect(front.state(second).token).toBeUndefined();
});

test("a wrong token: 535, counted against the connection and its address", async () => {
  const front = new SubmissionFront(smtpDeps(), SMTP_OPTIONS, () => []);
  const session = smtpSession();
  const err = await auth(front, session);
  expect(err?.responseCode).toBe(535);
  expect(front.state(session).failures).toBe(1);
  expect(front.throttle.hasFailures("192.0.2.7")).toBe(true);
  clearTimeout(front.state(session).authTimer);
});

test("a daemon that cannot say: 451, not counted as a failure", async () => {
  const front = new SubmissionFront(
    smtpDeps({ verifyToken: async () => ({ unavailable: true }) }),
    SMTP_OPTIONS,
    () => [],
  );
  const session = smtpSession();
  const err = await auth(front, session);
  expect(err?.responseCode).toBe(451);
  expect(front.state(session).failures).toBe(0);
  expect(front.throttle.hasFailures("192.0.2.7")).toBe(false);
  clearTimeout(front.state(session).authTimer);
});
