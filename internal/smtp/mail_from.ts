import type { SMTPServerAddress, SMTPServerSession } from "smtp-server";
import type { SubmissionFront } from "./front";
import { authRequired, type Reply } from "./replies";

// MAIL FROM opens a transaction: only an authenticated session may. The sender itself is the
// message's From, checked by the API.

/** MAIL FROM before a successful AUTH is refused; undefined when the session may send. */
export function mailFromRefusal(authenticated: boolean, secure: boolean): Reply | undefined {
  return authenticated ? undefined : authRequired(secure);
}

/** onMailFrom. */
export function mailFrom(
  front: SubmissionFront,
  _address: SMTPServerAddress,
  session: SMTPServerSession,
  done: (err?: Error | null) => void,
) {
  const s = front.state(session);
  const refused = mailFromRefusal(Boolean(session.user && s.token), session.secure);
  if (refused) return done(front.refusal(refused));
  s.inTransaction = true;
  done();
}
