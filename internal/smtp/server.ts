// The SMTP submission front: smtp-server with its documented on* hooks, each a stage of its own
// (connect.ts, auth.ts, mail_from.ts, rcpt_to.ts, data.ts) deciding by replies.ts and sharing
// what the front keeps (front.ts). It keeps no state beyond the open connections: the token is
// checked by the daemon at AUTH and everything else is decided by POST /api/v1/emails.
import { SMTPServer } from "smtp-server";
import { MAX_MESSAGE_BYTES } from "../limits/limits";
import { authenticate } from "./auth";
import { closed, connect, secured } from "./connect";
import { data } from "./data";
import { type SmtpDeps, type SmtpOptions, SubmissionFront } from "./front";
import { mailFrom } from "./mail_from";
import { GREETING_PATCH_FOR, greetAtOnce, installedSmtpServer, keepOwnEnhancedCodes } from "./patches";
import { rcptTo } from "./rcpt_to";
import { commonServerOptions } from "./server_options";
import { authRequired, replyLine, shuttingDown } from "./replies";

/** The submission server, and drain(): every connection closes with a 421 once its current transaction is answered. */
export type SubmissionServer = SMTPServer & { drain(): void };

export function submissionServer(deps: SmtpDeps, o: SmtpOptions): SubmissionServer {
  keepOwnEnhancedCodes();
  if (!greetAtOnce())
    deps.log.warn(
      "smtp-server is not the release the greeting patch was written for; greetings keep its 100 ms pause",
      { installed: installedSmtpServer, patchedFor: GREETING_PATCH_FOR },
    );
  const front = new SubmissionFront(deps, o, () => server.connections);
  const server: SMTPServer = new SMTPServer({
    ...commonServerOptions({ ...o, banner: "mailcore submission", size: MAX_MESSAGE_BYTES }),
    authMethods: ["PLAIN", "LOGIN"],
    authRequiredMessage: replyLine(authRequired(true)),
    // The stages.
    onConnect: (session, done) => connect(front, session, done),
    onSecure: (_socket, session, done) => secured(session, done),
    onAuth: (auth, session, done) => authenticate(front, auth, session, done),
    onMailFrom: (address, session, done) => mailFrom(front, address, session, done),
    onRcptTo: (address, session, done) => rcptTo(front, address, session, done),
    onData: (stream, session, done) => data(front, stream, session, done),
    onClose: (session) => closed(front, session),
  });

  // Connection-level failures (a reset mid-transaction, a failed TLS handshake) are the
  // client's business; without a listener they would end the process.
  server.on("error", (err: Error & { code?: string }) => {
    deps.log.warn("connection error", { error: err.message, code: err.code });
  });
  return Object.assign(server, { drain: () => front.drain(shuttingDown()) });
}
