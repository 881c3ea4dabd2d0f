// One SMTP session to one address of an MX host: EHLO with our name, STARTTLS as the
// destination's TLS mode asks, then messages one after another (RSET between), QUIT. Built on
// nodemailer's SMTPConnection, which already bounds a reply's size, pipelines MAIL/RCPT/DATA,
// sends the bytes it is given with dot-stuffing only (on CRLF text) and discards what a server
// sent in plaintext after STARTTLS; this file adds the deadlines, where in the session a
// failure happened, and what the session's TLS was.
import SMTPConnection from "nodemailer/lib/smtp-connection";
import { type Failure, replyOf, type Stage, type TlsState } from "./outcome";

/**
 * opportunistic: STARTTLS when offered, the certificate not checked, plaintext when not offered;
 * required: STARTTLS or no delivery, the certificate not checked; verified: STARTTLS with a
 * certificate valid for the host's name (MTA-STS enforce) or no delivery.
 */
export type TlsMode = "opportunistic" | "required" | "verified";

export interface SessionTimeouts {
  /** From the TCP connect to the end of EHLO and STARTTLS. */
  setupMs: number;
  /** Silence while a reply is awaited (a server that stops answering, in DATA or anywhere). */
  replyMs: number;
  /** A whole message, from MAIL FROM to the reply to its final dot (a server that trickles). */
  messageMs: number;
}

/**
 * 30 s to set a session up, 60 s of silence, 5 minutes a message: shorter than RFC 5321's
 * minimums (5 minutes a command, 10 after the final dot), which are for a network of the
 * 1980s, and near KumoMTA's (60 s idle and after the dot), so a receiver that hangs holds a
 * connection for a minute, not ten.
 */
export const DEFAULT_TIMEOUTS: SessionTimeouts = { setupMs: 30_000, replyMs: 60_000, messageMs: 300_000 };

/** A reply longer than this (a line that never ends) drops the connection; real replies are under 1 KiB. */
export const MAX_REPLY_BYTES = 64 * 1024;

export interface SessionOptions {
  /** The MX host's name: SNI, and what a verified certificate must name. */
  host: string;
  /** The address to connect to. */
  address: string;
  port: number;
  /** Our name in EHLO. */
  heloName: string;
  tls: TlsMode;
  timeouts: SessionTimeouts;
  /** Certificates trusted besides the system's (tests: a CA of their own). */
  trustedCa?: string[];
}

/** A session's failure, with where it happened. */
export class SessionError extends Error implements Failure {
  constructor(
    readonly stage: Stage,
    readonly reply: ReturnType<typeof replyOf>,
    readonly error: string | undefined,
  ) {
    super(reply?.text ?? error ?? stage);
  }
}

interface NodemailerError extends Error {
  code?: string;
  originalCode?: string;
  response?: string;
  command?: string;
  timeoutType?: string;
}

// The command whose reply is awaited tells the stage a failure is at.
const STAGE_OF_COMMAND: Record<string, Stage> = {
  "MAIL FROM": "mail",
  "RCPT TO": "rcpt",
  EHLO: "ehlo",
  HELO: "ehlo",
  STARTTLS: "starttls",
  RSET: "rset",
  MAIL: "mail",
  RCPT: "rcpt",
  DATA: "data",
};

export class MxSession {
  /** Messages handed to this session so far. */
  messages = 0;
  private ended = false;
  private tlsState: TlsState = "none";

  private constructor(
    private readonly conn: SMTPConnection,
    readonly options: SessionOptions,
    /** Where the session is: set by the commands the client sends (stageTracker) and by this class. */
    private readonly progress: { stage: Stage },
  ) {}

  /** Connects and says EHLO (and STARTTLS); a SessionError when that fails. */
  static open(o: SessionOptions): Promise<MxSession> {
    const progress: { stage: Stage } = { stage: "connect" };
    const conn = new SMTPConnection({
      host: o.address,
      port: o.port,
      servername: o.host,
      name: o.heloName,
      secure: false,
      opportunisticTLS: o.tls === "opportunistic",
      requireTLS: o.tls !== "opportunistic",
      tls: {
        rejectUnauthorized: o.tls === "verified",
        servername: o.host,
        minVersion: "TLSv1.2",
        ...(o.trustedCa ? { ca: o.trustedCa } : {}),
      },
      connectionTimeout: o.timeouts.setupMs,
      greetingTimeout: o.timeouts.setupMs,
      socketTimeout: o.timeouts.replyMs,
      socketCloseTimeout: 1_000,
      maxResponseSize: MAX_REPLY_BYTES,
      transactionLog: true,
      logger: stageTracker(progress),
    });
    const session = new MxSession(conn, o, progress);
    conn.on("end", () => {
      session.ended = true;
    });
    // A failure to set the session up comes as an 'error' event (or to connect's callback);
    // later ones reach the callback of the call they end, and the event is only noted.
    let opening = true;
    return session.withDeadline<MxSession>(o.timeouts.setupMs + 1_000, (done) => {
      conn.on("error", (err) => opening && done(session.failure(err as NodemailerError)));
      conn.connect((err) => {
        opening = false;
        if (err) return done(session.failure(err as NodemailerError));
        session.tlsState = conn.secure ? (o.tls === "verified" ? "verified" : "unverified") : "none";
        progress.stage = "mail";
        done(undefined, session);
      });
    });
  }

  get tls(): TlsState {
    return this.tlsState;
  }

  /** Whether the connection is still open (the server has not closed it, no failure ended it). */
  get alive(): boolean {
    return !this.ended;
  }

  /**
   * Sends one message: MAIL FROM returnPath, RCPT TO recipient, DATA with raw (CRLF line ends,
   * sent as they are but for dot-stuffing). The reply to the final dot on success; a
   * SessionError otherwise. A 250 to DATA is the end: the message is delivered, whatever the
   * connection does after it.
   */
  send(returnPath: string, recipient: string, raw: Buffer): Promise<string> {
    this.messages++;
    this.progress.stage = "mail";
    const envelope = { from: returnPath, to: [recipient], size: raw.length, use8BitMime: has8Bit(raw) };
    return this.withDeadline(this.options.timeouts.messageMs, (done) =>
      this.conn.send(envelope, raw, (err, info) =>
        err ? done(this.failure(err as NodemailerError)) : done(undefined, info.response),
      ),
    );
  }

  /** RSET before the next message on a reused connection; it also tells that the connection still works. */
  reset(): Promise<void> {
    this.progress.stage = "rset";
    return this.withDeadline(this.options.timeouts.replyMs, (done) =>
      this.conn.reset((err) => (err ? done(this.failure(err as NodemailerError)) : done(undefined, undefined))),
    );
  }

  /** QUIT, and the connection closed within a second whatever the server does. */
  quit(): void {
    if (this.ended) return;
    this.ended = true;
    this.conn.quit();
    setTimeout(() => this.conn.close(), 1_000).unref();
  }

  /** Drops the connection at once. */
  close(): void {
    this.ended = true;
    this.conn.close();
  }

  /** Runs a call of the client; past deadlineMs the connection is dropped and the call fails at its stage. */
  withDeadline<T>(deadlineMs: number, call: (done: (err: SessionError | undefined, v?: T) => void) => void) {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const done = (err: SessionError | undefined, v?: T) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) {
          this.ended = true;
          reject(err);
        } else resolve(v as T);
      };
      const timer = setTimeout(() => {
        const err = new SessionError(this.progress.stage, undefined, `no complete reply within ${deadlineMs} ms`);
        this.close();
        done(err);
      }, deadlineMs);
      if (this.ended) return done(new SessionError(this.progress.stage, undefined, "the connection is closed"));
      call(done);
    });
  }

  /** The client's error as a SessionError at the stage the session was in. */
  private failure(err: NodemailerError): SessionError {
    const reply = replyOf(err.response);
    // With PIPELINING the client has sent DATA before RCPT's reply: the error's command says which reply it was.
    let stage = STAGE_OF_COMMAND[err.command ?? ""] ?? this.progress.stage;
    if (err.code === "ETLS") stage = "starttls";
    else if (stage === "connect" && reply) stage = "greeting";
    const error = reply ? undefined : `${err.originalCode ?? err.code ?? "error"}: ${err.message}`;
    return new SessionError(stage, reply, error);
  }
}

/** A logger for SMTPConnection that only follows the connection and the commands it sends, to know the stage a failure is at. */
function stageTracker(progress: { stage: Stage }) {
  const ignore = () => {};
  return {
    trace: ignore,
    // The connection's "established" line (it names the peer's address): the greeting is awaited next.
    info: (entry: { tnx?: string; remoteAddress?: string }) => {
      if (entry?.tnx === "network" && entry.remoteAddress !== undefined && progress.stage === "connect")
        progress.stage = "greeting";
    },
    warn: ignore,
    error: ignore,
    fatal: ignore,
    debug: (entry: { tnx?: string }, message: unknown) => {
      if (entry?.tnx !== "client" || typeof message !== "string") return;
      const stage = STAGE_OF_COMMAND[message.split(/[ :]/, 1)[0]!.toUpperCase()];
      if (stage) progress.stage = stage;
    },
  };
}

function has8Bit(raw: Buffer): boolean {
  return /[\x80-\xff]/.test(raw.toString("latin1"));
}
