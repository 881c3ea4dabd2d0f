import type { SMTPServerSession } from "smtp-server";
import type { Logger } from "../log/log";
import type { SmtpMetrics } from "../metrics/metrics";
import { SessionSlots } from "./admission";
import type { ApiClient } from "./api";
import { authTimedOut, type Reply, replyLine } from "./replies";
import { AuthThrottle } from "./throttle";

// What the SMTP front keeps across its connections and its stages: each connection's state, the
// session slots of addresses and organizations (admission.ts), the failed AUTH attempts per
// address (throttle.ts); and how a connection is refused, timed and closed. It keeps nothing
// else: the token is checked by the daemon at AUTH, everything else is decided by the API.

/** DirectoryService.VerifyToken's answer, as the front reads it (verify.ts). */
export type VerifyResult = { valid: true; orgId: string; orgSlug: string } | { valid: false } | { unavailable: true };

export interface SmtpDeps {
  /** Checks a token without counting it against any limit. */
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
  /** The per-address limits count an IPv6 client by its network of this many bits (IPV6_PREFIX_BITS). */
  ipv6PrefixBits: number;
  /** The name in the greeting and EHLO; the host name by default. */
  name?: string;
}

/** What the front keeps about a connection. The token lives here, never in session.user (which the library may log). */
export interface ConnectionState {
  label?: string;
  orgSlug?: string;
  token?: string;
  failures: number;
  /** Between MAIL FROM and the reply to DATA. */
  inTransaction: boolean;
  /** The session time limit passed or the front is stopping: close with this once the current reply is out. */
  closeWith?: Reply;
  timer?: ReturnType<typeof setTimeout>;
  /** The client the per-address limits count it against: its address, an IPv6 one's network (addressGroup). */
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

/** A connection of the server, as the front closes it. */
export interface OpenConnection {
  session?: SMTPServerSession;
  send(code: number, line: string): void;
  close(): void;
}

/** An error reply to a hook's callback: smtp-server sends its message with its responseCode. */
export const smtpError = (r: Reply) => Object.assign(new Error(replyLine(r)), { responseCode: r.code });

export class SubmissionFront {
  private readonly states = new WeakMap<SMTPServerSession, ConnectionState>();
  /** Sessions per address before AUTH and per organization after. */
  readonly slots: SessionSlots;
  /** Failed AUTH attempts per address, across connections. */
  readonly throttle: AuthThrottle;

  constructor(
    readonly deps: SmtpDeps,
    readonly o: SmtpOptions,
    /** The server's open connections (the server is made after the front). */
    private readonly connections: () => Iterable<OpenConnection>,
  ) {
    this.slots = new SessionSlots({
      perAddress: o.maxClientsPerIp,
      waitingPerAddress: o.maxWaitingPerIp,
      perOrganization: o.maxSessionsPerOrg,
    });
    this.throttle = new AuthThrottle(o.authFailuresPerIp);
  }

  get log(): Logger {
    return this.deps.log;
  }

  /** The connection's state, made at its first stage. */
  state(session: SMTPServerSession): ConnectionState {
    let s = this.states.get(session);
    if (!s) {
      s = { failures: 0, inTransaction: false };
      this.states.set(session, s);
    }
    return s;
  }

  /** The state of a connection that closed, forgotten; undefined when it had none. */
  forget(session: SMTPServerSession): ConnectionState | undefined {
    const s = this.states.get(session);
    this.states.delete(session);
    return s;
  }

  /** A reply sent, counted by its code. */
  counted(code: number): void {
    this.deps.metrics?.replies.inc({ code: String(code) });
  }

  /** An error reply to a hook's callback, counted. */
  refusal(r: Reply): Error {
    this.counted(r.code);
    return smtpError(r);
  }

  /** An idle connection before AUTH only holds a slot: it gets a short time (paused while an AUTH is answered). */
  armAuthTimer(session: SMTPServerSession): void {
    const s = this.state(session);
    clearTimeout(s.authTimer);
    s.authTimer = setTimeout(
      () => this.closeSession(session, authTimedOut(this.o.authTimeoutMs)),
      this.o.authTimeoutMs,
    );
    s.authTimer.unref?.();
  }

  /** Closes the connection now, or after the reply to the transaction under way. */
  closeWhenIdle(session: SMTPServerSession, reply: Reply): void {
    const s = this.state(session);
    s.closeWith = reply;
    if (!s.inTransaction) this.closeSession(session, reply);
  }

  /** Ends a connection: with a reply (a 421 closes it) or, without one, once its last reply is flushed. */
  closeSession(session: SMTPServerSession, with421?: Reply): void {
    for (const conn of this.connections()) {
      if (conn.session !== session) continue;
      if (with421) {
        this.counted(421);
        conn.send(421, replyLine(with421));
      } else conn.close();
    }
  }

  /** Every connection closes with this reply once its current transaction is answered. */
  drain(reply: Reply): void {
    for (const conn of this.connections()) if (conn.session) this.closeWhenIdle(conn.session, reply);
  }
}
