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

/**
 * A refused AUTH, logged and answered. A wrong credential also counts against the connection and
 * its address (past a few, the reply is held back); after the last one allowed the connection closes.
 */
function refuse(
  front: SubmissionFront,
  session: SMTPServerSession,
  label: string,
  reply: Reply,
  close: boolean,
  done: AuthDone,
): void {
  const s = front.state(session);
  const holdMs = reply.code === 535 ? front.throttle.failed(s.ip ?? "") : 0;
  if (reply.code === 535) s.failures++;
  front.log.warn("auth refused", {
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
}

/**
 * A good token: from here on the session counts for its organization, no longer for its address
 * (and for neither when it closed while its token was checked); refused when the organization
 * holds its sessions.
 */
function authenticated(
  front: SubmissionFront,
  session: SMTPServerSession,
  label: string,
  token: string,
  org: { orgId: string; orgSlug: string },
  done: AuthDone,
): void {
  const s = front.state(session);
  if (s.slot === "address") {
    if (!front.slots.joinOrganization(org.orgId)) {
      front.log.warn("auth refused: the organization holds its sessions", { session: session.id, org: org.orgSlug });
      done(front.refusal(tooManySessionsForOrganization(front.o.maxSessionsPerOrg)));
      return;
    }
    front.slots.leaveAddress(s.ip!);
    s.slot = "organization";
  }
  Object.assign(s, { label, orgSlug: org.orgSlug, orgId: org.orgId, token });
  clearTimeout(s.authTimer);
  front.log.info("authenticated", { session: session.id, user: label, org: org.orgSlug, ip: session.remoteAddress });
  front.counted(235);
  done(null, { user: { username: label } });
}

/** onAuth: the credentials' shape checked here, the token by the daemon. */
export function authenticate(
  front: SubmissionFront,
  auth: SMTPServerAuthentication,
  session: SMTPServerSession,
  done: AuthDone,
) {
  const s = front.state(session);
  const label = logLabel(auth.username ?? "");
  clearTimeout(s.authTimer);
  const throttled = front.throttle.refusedForSeconds(s.ip ?? "");
  if (throttled > 0) return done(front.refusal(authThrottled(throttled)));
  const password = auth.password ?? undefined;
  const check = checkCredentials(auth.username, password, isWellFormed, s.failures);
  if (!check.verify) return refuse(front, session, label, check.reply, check.close, done);
  front.deps.verifyToken(password!).then(
    (result) => {
      const next = afterVerify(verdictOf(result), s.failures);
      if (!next.ok) {
        if ("unavailable" in result)
          front.log.warn("token check failed: the daemon is unavailable", { session: session.id, user: label });
        return refuse(front, session, label, next.reply, next.close, done);
      }
      const org = "orgId" in result ? result : { orgId: "", orgSlug: "" };
      authenticated(front, session, label, password!, org, done);
    },
    (err: Error) => {
      front.log.error("token check threw", { session: session.id, error: err.message });
      refuse(front, session, label, authUnavailable(), false, done);
    },
  );
}
