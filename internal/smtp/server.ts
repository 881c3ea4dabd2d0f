// The SMTP submission front: smtp-server wired to the decisions of replies.ts and the
// conversion of message.ts. It keeps no state beyond the open connections: the token is
// checked by the daemon at AUTH and everything else is decided by POST /api/v1/emails.
import { simpleParser } from "mailparser";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import { SMTPConnection } from "smtp-server/lib/smtp-connection.js";
import { normalizeIp } from "../clientip/clientip";
import { MAX_MESSAGE_BYTES } from "../limits/limits";
import type { Logger } from "../log/log";
import type { SmtpMetrics } from "../metrics/metrics";
import { isWellFormed } from "../token/token";
import { SessionSlots } from "./admission";
import type { ApiClient } from "./api";
import { PARSE_OPTIONS, toSendRequest } from "./message";
import {
  afterVerify,
  apiReply,
  authRequired,
  authThrottled,
  authTimedOut,
  authUnavailable,
  checkCredentials,
  checkRecipient,
  dataAborted,
  invalidMessage,
  noSlotInTime,
  type Reply,
  replyLine,
  sessionExpired,
  shuttingDown,
  type TokenVerdict,
  tooLarge,
  tooManyConnectionsFromAddress,
  tooManySessionsForOrganization,
} from "./replies";
import { AuthThrottle } from "./throttle";

export type VerifyResult = { valid: true; orgId: string; orgSlug: string } | { valid: false } | { unavailable: true };

export interface SmtpDeps {
  /** DirectoryService.VerifyToken: checks a token without counting it against any limit. */
  verifyToken(token: string): Promise<VerifyResult>;
  api: ApiClient;
  log: Logger;
  metrics?: SmtpMetrics;
}

export interface SmtpOptions {
  tls: { cert: Buffer | string; key: Buffer | string };
  maxClients: number;
  /** Unauthenticated connections one client address may hold at once; admission.ts. */
  maxClientsPerIp: number;
  /** Connections of one address above maxClientsPerIp that wait for a slot before their greeting. */
  maxWaitingPerIp: number;
  /** Authenticated sessions one organization may hold at once. */
  maxSessionsPerOrg: number;
  /** A connection without a successful AUTH this long after its greeting is closed; also the longest wait for a slot. */
  authTimeoutMs: number;
  /** Failed AUTH attempts (draining at one a minute) at which an address is refused; throttle.ts. */
  authFailuresPerIp: number;
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
  /** Between MAIL FROM and the reply to DATA. */
  inTransaction: boolean;
  /** A message is being forwarded to the API. */
  forwarding: boolean;
  /** The session time limit passed or the front is stopping: close with this once the current reply is out. */
  closeWith?: Reply;
  timer?: ReturnType<typeof setTimeout>;
  /** The client's address. */
  ip?: string;
  /** What the connection counts against (admission.ts): waiting for a slot, its address's slot, its organization. */
  slot?: "waiting" | "address" | "organization";
  /** The organization it counts for once authenticated. */
  orgId?: string;
  /** While waiting: the call that greets it once a slot is its own, and the bound of the wait. */
  admit?: () => void;
  waitTimer?: ReturnType<typeof setTimeout>;
  authTimer?: ReturnType<typeof setTimeout>;
}

/** The submission server, and drain(): every connection closes with a 421 once its current transaction is answered. */
export type SubmissionServer = SMTPServer & { drain(): void };

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
  proto.send = function (
    this: SMTPConnection,
    code: number,
    data?: string | string[] | null,
    context?: string | false,
  ) {
    return send.call(this, code, data, typeof data === "string" && ENHANCED.test(data) ? false : context);
  };
  proto[PATCHED] = true;
}

const GREETING_PATCHED = Symbol.for("mailcore.smtp.greetingAtOnce");
/** The smtp-server release whose SMTPConnection.init() greetAtOnce() replaces. */
const GREETING_PATCH_FOR = "3.21.6";
const installedSmtpServer: string = createRequire(import.meta.url)("smtp-server/package.json").version;
/** The library's early-talker pause, kept for the addresses where it matters (onConnect). */
const EARLY_TALKER_PAUSE_MS = 100;

/** The private members of SMTPConnection that init() uses. */
type ConnectionInternals = SMTPConnection & {
  _setListeners(callback: () => void): void;
  _server: SMTPServer;
  name: string;
};

/**
 * smtp-server holds every greeting 100 ms in SMTPConnection.init() (a hard-coded pause to
 * catch clients that talk before the greeting; no option turns it off). A submission port
 * does not need it for every client: onConnect pauses the greeting where it matters. This is
 * the library's init() without the pause; whatever a client sends before its greeting is
 * still refused by the library ("421 You talk too soon"), also while onConnect holds the
 * greeting. Applied only to the release it was written against; false otherwise (the pause stays).
 */
function greetAtOnce(): boolean {
  const proto = SMTPConnection.prototype as ConnectionInternals & { [GREETING_PATCHED]?: true };
  if (proto[GREETING_PATCHED]) return true;
  if (installedSmtpServer !== GREETING_PATCH_FOR) return false;
  proto.init = function (this: ConnectionInternals) {
    this._setListeners(() => {
      const { maxClients } = this._server.options;
      if (maxClients && this._server.connections.size > maxClients)
        return this.send(421, `${this.name} Too many connected clients, try again in a moment`, false);
      this.connectionReady();
    });
  };
  proto[GREETING_PATCHED] = true;
  return true;
}

const smtpError = (r: Reply) => Object.assign(new Error(replyLine(r)), { responseCode: r.code });

/** A username is a log label only; one that looks like a token is not written down. */
const logLabel = (username: string) =>
  isWellFormed(username) ? "[token-like username hidden]" : username.slice(0, 64);

export function submissionServer(deps: SmtpDeps, o: SmtpOptions): SubmissionServer {
  keepOwnEnhancedCodes();
  const { log } = deps;
  if (!greetAtOnce())
    log.warn("smtp-server is not the release the greeting patch was written for; greetings keep its 100 ms pause", {
      installed: installedSmtpServer,
      patchedFor: GREETING_PATCH_FOR,
    });
  const counted = (code: number) => deps.metrics?.replies.inc({ code: String(code) });
  /** An error reply to a handler's callback, counted. */
  const refusal = (r: Reply) => {
    counted(r.code);
    return smtpError(r);
  };
  const states = new WeakMap<SMTPServerSession, State>();
  const state = (session: SMTPServerSession): State => {
    let s = states.get(session);
    if (!s) {
      s = { failures: 0, inTransaction: false, forwarding: false };
      states.set(session, s);
    }
    return s;
  };
  /** Sessions per address before AUTH and per organization after, and failed AUTH attempts per address across connections. */
  const slots = new SessionSlots({
    perAddress: o.maxClientsPerIp,
    waitingPerAddress: o.maxWaitingPerIp,
    perOrganization: o.maxSessionsPerOrg,
  });
  const throttle = new AuthThrottle(o.authFailuresPerIp);
  /** An idle connection before AUTH only holds a slot: it gets a short time (paused while an AUTH is answered). */
  const armAuthTimer = (session: SMTPServerSession) => {
    const s = state(session);
    clearTimeout(s.authTimer);
    s.authTimer = setTimeout(() => closeSession(session, authTimedOut(o.authTimeoutMs)), o.authTimeoutMs);
    s.authTimer.unref?.();
  };
  /** Closes the connection now, or after the reply to the transaction under way. */
  const closeWhenIdle = (session: SMTPServerSession, reply: Reply) => {
    const s = state(session);
    s.closeWith = reply;
    if (!s.inTransaction) closeSession(session, reply);
  };

  /** Ends a connection: with a reply (a 421 closes it) or, without one, once its last reply is flushed. */
  const closeSession = (session: SMTPServerSession, with421?: Reply) => {
    for (const conn of server.connections) {
      if (conn.session !== session) continue;
      if (with421) {
        counted(421);
        conn.send(421, replyLine(with421));
      } else conn.close();
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
    // At shutdown, a transaction still running this long after drain() is cut off (the process exits within 10 s).
    closeTimeout: 8_000,
    logger: false,

    onConnect(session, done) {
      const ip = normalizeIp(session.remoteAddress);
      const throttled = throttle.refusedForSeconds(ip);
      if (throttled > 0) return done(refusal(authThrottled(throttled)));
      // AUTH is neither offered nor accepted before STARTTLS (cleared in onSecure).
      session.disabledCommands = ["AUTH"];
      const s = state(session);
      s.ip = ip;
      // An address with failed AUTH attempts not yet drained keeps the early-talker pause:
      // what it sends before its greeting is refused.
      const pauseMs = throttle.hasFailures(ip) ? EARLY_TALKER_PAUSE_MS : 0;
      const greet = () => {
        clearTimeout(s.waitTimer);
        Object.assign(s, { slot: "address", admit: undefined, waitTimer: undefined });
        s.timer = setTimeout(() => closeWhenIdle(session, sessionExpired()), o.sessionTimeoutMs);
        s.timer.unref?.();
        armAuthTimer(session);
        if (pauseMs > 0) setTimeout(done, pauseMs);
        else done();
      };
      const arrival = slots.arrive(ip, greet);
      if (arrival === "admitted") return greet();
      if (arrival === "refused")
        return done(refusal(tooManyConnectionsFromAddress(o.maxClientsPerIp, o.maxWaitingPerIp)));
      // Its greeting waits for one of its address's slots (another connection authenticates or closes).
      Object.assign(s, { slot: "waiting", admit: greet });
      s.waitTimer = setTimeout(() => {
        slots.stopWaiting(ip, greet);
        Object.assign(s, { slot: undefined, admit: undefined });
        done(refusal(noSlotInTime(o.authTimeoutMs)));
      }, o.authTimeoutMs);
      s.waitTimer.unref?.();
    },

    onSecure(_socket, session, done) {
      session.disabledCommands = undefined;
      done();
    },

    onAuth(auth, session, done) {
      const s = state(session);
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
          done(refusal(reply));
          if (close) setImmediate(() => closeSession(session));
          else armAuthTimer(session);
        }, holdMs);
      };
      clearTimeout(s.authTimer);
      const throttled = throttle.refusedForSeconds(s.ip ?? "");
      if (throttled > 0) return done(refusal(authThrottled(throttled)));
      const password = auth.password ?? undefined;
      const check = checkCredentials(auth.username, password, isWellFormed, s.failures);
      if (!check.verify) return fail(check.reply, check.close);
      deps.verifyToken(password!).then(
        (result) => {
          const verdict: TokenVerdict = "unavailable" in result ? result : { valid: result.valid };
          const next = afterVerify(verdict, s.failures);
          if (!next.ok) {
            if ("unavailable" in result)
              log.warn("token check failed: the daemon is unavailable", { session: session.id, user: label });
            return fail(next.reply, next.close);
          }
          const [orgId, orgSlug] = "orgId" in result ? [result.orgId, result.orgSlug] : ["", ""];
          // From here on the session counts for its organization, no longer for its address (and
          // for neither when it closed while its token was checked).
          if (s.slot === "address") {
            if (!slots.joinOrganization(orgId)) {
              log.warn("auth refused: the organization holds its sessions", { session: session.id, org: orgSlug });
              return done(refusal(tooManySessionsForOrganization(o.maxSessionsPerOrg)));
            }
            slots.leaveAddress(s.ip!);
            s.slot = "organization";
          }
          Object.assign(s, { label, orgSlug, orgId, token: password! });
          clearTimeout(s.authTimer);
          log.info("authenticated", { session: session.id, user: label, org: orgSlug, ip: session.remoteAddress });
          counted(235);
          done(null, { user: { username: label } });
        },
        (err: Error) => {
          log.error("token check threw", { session: session.id, error: err.message });
          fail(authUnavailable(), false);
        },
      );
    },

    onMailFrom(_address, session, done) {
      const s = state(session);
      if (!session.user || !s.token) return done(refusal(authRequired(session.secure)));
      s.inTransaction = true;
      done();
    },

    onRcptTo(address, session, done) {
      const refused = checkRecipient(
        session.envelope.rcptTo.map((a) => a.address),
        address.address,
      );
      done(refused ? refusal(refused) : null);
    },

    onData(stream: SMTPServerDataStream, session, done) {
      const s = state(session);
      const started = Date.now();
      const requestId = `smtp_${randomBytes(12).toString("hex")}`;
      const chunks: Buffer[] = [];
      let kept = 0;
      let overflow = false;
      let finished = false;
      const finish = (reply: Reply & { messageId?: string }) => {
        if (finished) return;
        finished = true;
        s.inTransaction = false;
        const fields = {
          requestId,
          session: session.id,
          user: s.label,
          org: s.orgSlug,
          bytes: stream.byteLength,
          ms: Date.now() - started,
        };
        if (reply.code === 250) {
          log.info("queued", { ...fields, id: reply.messageId });
          counted(250);
          done(null, replyLine(reply));
        } else {
          log.info("refused", { ...fields, reply: `${reply.code} ${reply.status}`, reason: reply.text });
          done(refusal(reply));
        }
        const closeWith = s.closeWith;
        if (closeWith) setImmediate(() => closeSession(session, closeWith));
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
        const envelope = {
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          rcptTo: session.envelope.rcptTo[0]!.address,
        };
        void (async () => {
          let parsed: Awaited<ReturnType<typeof simpleParser>>;
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
            const answer = await deps.api.send({
              token: s.token!,
              json: request.json,
              idempotencyKey: request.idempotencyKey,
              clientIp: session.remoteAddress,
              requestId,
            });
            finish(apiReply(answer, Date.now(), request.idempotencyKey !== undefined));
          } finally {
            s.forwarding = false;
          }
        })().catch((err: Error) => {
          log.error("message handling failed", { session: session.id, error: err.message });
          finish({
            code: 451,
            status: "4.3.0",
            text: "Internal error while handling the message; nothing was queued, try again",
          });
        });
      });
    },

    onClose(session) {
      const s = states.get(session);
      clearTimeout(s?.timer);
      clearTimeout(s?.authTimer);
      clearTimeout(s?.waitTimer);
      if (s?.slot === "waiting") slots.stopWaiting(s.ip!, s.admit!);
      else if (s?.slot === "address") slots.leaveAddress(s.ip!);
      else if (s?.slot === "organization") slots.leaveOrganization(s.orgId!);
      if (s) s.slot = undefined;
      states.delete(session);
    },
  });

  // Connection-level failures (a reset mid-transaction, a failed TLS handshake) are the
  // client's business; without a listener they would end the process.
  server.on("error", (err: Error & { code?: string }) => {
    log.warn("connection error", { error: err.message, code: err.code });
  });
  return Object.assign(server, {
    drain() {
      for (const conn of server.connections) if (conn.session) closeWhenIdle(conn.session, shuttingDown());
    },
  });
}
