import type { SMTPServerAuthentication, SMTPServerAuthenticationResponse, SMTPServerSession } from "smtp-server";
import { isWellFormed } from "../token/token";
import type { SubmissionFront, VerifyResult } from "./front";
import {
  afterVerify,
  authThrottled,
  authUnavailable,
  checkCredentials,
  type Reply,
  type TokenVerdict,
  tooManySessionsForOrganization,
} from "./replies";

// AUTH PLAIN or LOGIN: the password is an API token, checked by the daemon. A wrong one counts
// against the connection and its address; a right one moves the session from its address's
// slot to its organization's.

type AuthDone = (err: Error | null | undefined, response?: SMTPServerAuthenticationResponse) => void;

/** A username is a log label only; one that looks like a token is not written down. */
export const logLabel = (username: string) =>
  isWellFormed(username) ? "[token-like username hidden]" : username.slice(0, 64);

/** The daemon's answer as the reply rules read it (replies.ts afterVerify). */
export function verdictOf(result: VerifyResult): TokenVerdict {
  return "unavailable" in result ? result : { valid: result.valid };
}

/** onAuth. */
export function authenticate(
  front: SubmissionFront,
  auth: SMTPServerAuthentication,
  session: SMTPServerSession,
  done: AuthDone,
) {
  const { log, throttle } = front;
  const s = front.state(session);
  const label = logLabel(auth.username ?? "");
  const fail = (reply: Reply, close: boolean) => {
    // A wrong credential also counts against the address; past a few, its reply is held back.
    const holdMs = reply.code === 535 ? throttle.failed(s.ip ?? "") : 0;
    if (reply.code === 535) s.failures++;
    log.warn("auth refused", {
      session: session.id,
      user: label,
      ip: s.ip,
      reply: `${reply.code} ${reply.status}`,
      failures: s.failures,
      holdMs,
    });
    setTimeout(() => {
      done(front.refusal(reply));
      if (close) setImmediate(() => front.closeSession(session));
      else front.armAuthTimer(session);
    }, holdMs);
  };
  clearTimeout(s.authTimer);
  const throttled = throttle.refusedForSeconds(s.ip ?? "");
  if (throttled > 0) return done(front.refusal(authThrottled(throttled)));
  const password = auth.password ?? undefined;
  const check = checkCredentials(auth.username, password, isWellFormed, s.failures);
  if (!check.verify) return fail(check.reply, check.close);
  front.deps.verifyToken(password!).then(
    (result) => {
      const next = afterVerify(verdictOf(result), s.failures);
      if (!next.ok) {
        if ("unavailable" in result)
          log.warn("token check failed: the daemon is unavailable", { session: session.id, user: label });
        return fail(next.reply, next.close);
      }
      const [orgId, orgSlug] = "orgId" in result ? [result.orgId, result.orgSlug] : ["", ""];
      // From here on the session counts for its organization, no longer for its address (and
      // for neither when it closed while its token was checked).
      if (s.slot === "address") {
        if (!front.slots.joinOrganization(orgId)) {
          log.warn("auth refused: the organization holds its sessions", { session: session.id, org: orgSlug });
          return done(front.refusal(tooManySessionsForOrganization(front.o.maxSessionsPerOrg)));
        }
        front.slots.leaveAddress(s.ip!);
        s.slot = "organization";
      }
      Object.assign(s, { label, orgSlug, orgId, token: password! });
      clearTimeout(s.authTimer);
      log.info("authenticated", { session: session.id, user: label, org: orgSlug, ip: session.remoteAddress });
      front.counted(235);
      done(null, { user: { username: label } });
    },
    (err: Error) => {
      log.error("token check threw", { session: session.id, error: err.message });
      fail(authUnavailable(), false);
    },
  );
}
