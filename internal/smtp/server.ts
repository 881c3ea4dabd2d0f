// The SMTP submission front: smtp-server wired to the decisions of replies.ts and the
// conversion of message.ts. It keeps no state beyond the open connections: the token is
// checked by the daemon at AUTH and everything else is decided by POST /api/v1/emails.
import { simpleParser } from "mailparser";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import { SMTPConnection } from "smtp-server/lib/smtp-connection.js";
import type { Logger } from "../log/log";
import { isWellFormed } from "../token/token";
import type { ApiClient } from "./api";
import { PARSE_OPTIONS, toSendRequest } from "./message";
import {
  afterVerify,
  apiReply,
  authRequired,
  authUnavailable,
  checkCredentials,
  checkRecipient,
  dataAborted,
  invalidMessage,
  MAX_MESSAGE_BYTES,
  type Reply,
  replyLine,
  sessionExpired,
  type TokenVerdict,
  tooLarge,
} from "./replies";

export type VerifyResult = { valid: true; orgId: string; orgSlug: string } | { valid: false } | { unavailable: true };

export interface SmtpDeps {
  /** DirectoryService.VerifyToken: checks a token without counting it against any limit. */
  verifyToken(token: string): Promise<VerifyResult>;
  api: ApiClient;
  log: Logger;
}

export interface SmtpOptions {
  tls: { cert: Buffer | string; key: Buffer | string };
  maxClients: number;
  socketTimeoutMs: number;
  sessionTimeoutMs: number;
  /** The name in the greeting and EHLO; the host name by default. */
  name?: string;
}

/** What the front keeps about a connection. The token lives here, never in session.user (which the library may log). */
interface State {
  label?: string;
  orgSlug?: string;
  token?: string;
  failures: number;
  /** A message is being forwarded to the API. */
  forwarding: boolean;
  /** The session time limit passed; close once the current reply is out. */
  expired: boolean;
  timer?: ReturnType<typeof setTimeout>;
}

const ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;
const PATCHED = Symbol.for("mailcore.smtp.ownEnhancedCodes");

/**
 * smtp-server derives the enhanced status code of a handler's error from its basic code
 * alone (every 550 becomes 5.1.1, every 452 4.2.2). Our replies carry their own, more
 * precise one at the start of the text ("5.7.1 Sender refused: ..."); such a reply is sent
 * as written. Replies of the library itself keep the library's code.
 */
function keepOwnEnhancedCodes(): void {
  const proto = SMTPConnection.prototype as SMTPConnection & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const send = proto.send;
  proto.send = function (this: SMTPConnection, code: number, data?: string | string[] | null, context?: string | false) {
    return send.call(this, code, data, typeof data === "string" && ENHANCED.test(data) ? false : context);
  };
  proto[PATCHED] = true;
}

const smtpError = (r: Reply) => Object.assign(new Error(replyLine(r)), { responseCode: r.code });

/** A username is a log label only; one that looks like a token is not written down. */
const logLabel = (username: string) => (isWellFormed(username) ? "[token-like username hidden]" : username.slice(0, 64));

export function submissionServer(deps: SmtpDeps, o: SmtpOptions): SMTPServer {
  keepOwnEnhancedCodes();
  const { log } = deps;
  const states = new WeakMap<SMTPServerSession, State>();
  const state = (session: SMTPServerSession): State => {
    let s = states.get(session);
    if (!s) states.set(session, (s = { failures: 0, forwarding: false, expired: false }));
    return s;
  };

  /** Ends a connection: with a reply (a 421 closes it) or, without one, once its last reply is flushed. */
  const closeSession = (session: SMTPServerSession, with421?: Reply) => {
    for (const conn of server.connections) {
      if (conn.session !== session) continue;
      if (with421) conn.send(421, replyLine(with421));
      else conn.close();
    }
  };

  const server: SMTPServer = new SMTPServer({
    name: o.name,
    banner: "mailcore submission",
    key: o.tls.key,
    cert: o.tls.cert,
    size: MAX_MESSAGE_BYTES,
    authMethods: ["PLAIN", "LOGIN"],
    authRequiredMessage: replyLine(authRequired(true)),
    hideENHANCEDSTATUSCODES: false,
    hideDSN: true,
    // Delivery goes on through the worker's transport, which cannot promise TLS all the way.
    hideREQUIRETLS: true,
    disableReverseLookup: true,
    maxClients: o.maxClients,
    socketTimeout: o.socketTimeoutMs,
    closeTimeout: 10_000,
    logger: false,

    onConnect(session, done) {
      // AUTH is neither offered nor accepted before STARTTLS (cleared in onSecure).
      session.disabledCommands = ["AUTH"];
      const s = state(session);
      s.timer = setTimeout(() => {
        s.expired = true;
        if (!s.forwarding) closeSession(session, sessionExpired());
      }, o.sessionTimeoutMs);
      s.timer.unref?.();
      done();
    },

    onSecure(_socket, session, done) {
      session.disabledCommands = undefined;
      done();
    },

    onAuth(auth, session, done) {
      const s = state(session);
      const label = logLabel(auth.username ?? "");
      const fail = (reply: Reply, close: boolean) => {
        if (reply.code === 535) s.failures++;
        log.warn("auth refused", { session: session.id, user: label, reply: `${reply.code} ${reply.status}`, failures: s.failures });
        done(smtpError(reply));
        if (close) setImmediate(() => closeSession(session));
      };
      const password = auth.password ?? undefined;
      const check = checkCredentials(auth.username, password, isWellFormed, s.failures);
      if (!check.verify) return fail(check.reply, check.close);
      deps.verifyToken(password!).then(
        (result) => {
          const verdict: TokenVerdict = "unavailable" in result ? result : { valid: result.valid };
          const next = afterVerify(verdict, s.failures);
          if (!next.ok) {
            if ("unavailable" in result) log.warn("token check failed: the daemon is unavailable", { session: session.id, user: label });
            return fail(next.reply, next.close);
          }
          const orgSlug = "orgSlug" in result ? result.orgSlug : "";
          Object.assign(s, { label, orgSlug, token: password! });
          log.info("authenticated", { session: session.id, user: label, org: orgSlug, ip: session.remoteAddress });
          done(null, { user: { username: label } });
        },
        (err: Error) => {
          log.error("token check threw", { session: session.id, error: err.message });
          fail(authUnavailable(), false);
        },
      );
    },

    onMailFrom(_address, session, done) {
      if (!session.user || !state(session).token) return done(smtpError(authRequired(session.secure)));
      done();
    },

    onRcptTo(address, session, done) {
      const refusal = checkRecipient(
        session.envelope.rcptTo.map((a) => a.address),
        address.address,
      );
      done(refusal ? smtpError(refusal) : null);
    },

    onData(stream: SMTPServerDataStream, session, done) {
      const s = state(session);
      const started = Date.now();
      const chunks: Buffer[] = [];
      let kept = 0;
      let overflow = false;
      let finished = false;
      const finish = (reply: Reply & { messageId?: string }) => {
        if (finished) return;
        finished = true;
        const fields = { session: session.id, user: s.label, org: s.orgSlug, bytes: stream.byteLength, ms: Date.now() - started };
        if (reply.code === 250) {
          log.info("queued", { ...fields, id: reply.messageId });
          done(null, replyLine(reply));
        } else {
          log.info("refused", { ...fields, reply: `${reply.code} ${reply.status}`, reason: reply.text });
          done(smtpError(reply));
        }
        if (s.expired) setImmediate(() => closeSession(session, sessionExpired()));
      };

      // Kept in memory up to the limit and not a byte more; past it the rest is read and dropped.
      stream.on("data", (chunk: Buffer) => {
        if (overflow) return;
        if (kept + chunk.length > MAX_MESSAGE_BYTES) {
          overflow = true;
          chunks.length = 0;
          return;
        }
        chunks.push(chunk);
        kept += chunk.length;
      });
      // The client went away or timed out mid-DATA: nothing is forwarded.
      stream.on("error", () => finish(dataAborted()));
      stream.on("end", () => {
        if (finished) return;
        if (overflow || stream.sizeExceeded) return finish(tooLarge());
        const envelope = { mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", rcptTo: session.envelope.rcptTo[0]!.address };
        void (async () => {
          let parsed;
          try {
            parsed = await simpleParser(Buffer.concat(chunks, kept), PARSE_OPTIONS);
          } catch (err) {
            return finish(invalidMessage(`the message could not be parsed as MIME (${(err as Error).message})`));
          }
          chunks.length = 0;
          const request = toSendRequest(parsed, envelope);
          if (!request.ok) return finish(request.reply);
          s.forwarding = true;
          try {
            const answer = await deps.api.send({ token: s.token!, json: request.json, idempotencyKey: request.idempotencyKey, clientIp: session.remoteAddress });
            finish(apiReply(answer, Date.now()));
          } finally {
            s.forwarding = false;
          }
        })().catch((err: Error) => {
          log.error("message handling failed", { session: session.id, error: err.message });
          finish({ code: 451, status: "4.3.0", text: "Internal error while handling the message; nothing was queued, try again" });
        });
      });
    },

    onClose(session) {
      const s = states.get(session);
      if (s?.timer) clearTimeout(s.timer);
      states.delete(session);
    },
  });

  // Connection-level failures (a reset mid-transaction, a failed TLS handshake) are the
  // client's business; without a listener they would end the process.
  server.on("error", (err: Error & { code?: string }) => {
    log.warn("connection error", { error: err.message, code: err.code });
  });
  return server;
}
