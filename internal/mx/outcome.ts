// What one delivery attempt's end means for the message: delivered, a permanent failure (final
// at once) or a temporary one (retried later), decided from where in the session it ended and
// what the receiver replied. Pure: a table of sessions' ends tests it.
import { parseReply, type Reply, retryAfterHint } from "./reply";

/** Where in an SMTP session an attempt ended. */
export type Stage = "connect" | "greeting" | "ehlo" | "starttls" | "rset" | "mail" | "rcpt" | "data" | "queue";

/** How the session's channel was protected: not at all, TLS without checking the certificate, or verified TLS. */
export type TlsState = "none" | "unverified" | "verified";

export type Verdict = "delivered" | "permanent" | "temporary";

/** The facts of one attempt, kept in the message's history. */
export interface Attempt {
  atMs: number;
  /** The MX host name ("" for an attempt that reached no host). */
  host: string;
  /** The address connected to ("" when none was). */
  address: string;
  tls: TlsState;
  stage: Stage;
  verdict: Verdict;
  /** The receiver's reply, as received, when there was one. */
  reply?: string;
  code?: number;
  enhanced?: string;
  /** What went wrong without a reply (a refused connection, a timeout, a TLS failure). */
  error?: string;
}

/** How an attempt that was not delivered ended. */
export interface Failure {
  stage: Stage;
  /** The receiver's reply, when the failure is one. */
  reply?: Reply;
  /** A failure without a reply: its description. */
  error?: string;
}

export interface Classified {
  verdict: "permanent" | "temporary";
  /** For a permanent failure: whether it is about the mailbox (a hard bounce) rather than the message or its sender. */
  aboutMailbox: boolean;
  /** Whether the failure is the host's (the next MX host may do better) rather than the transaction's. */
  tryNextHost: boolean;
  /** The wait the reply asks for, in ms. */
  retryAfterMs?: number;
}

// Stages before a transaction starts: what fails there is the host or the channel, not the message.
const HOST_STAGES = new Set<Stage>(["connect", "greeting", "ehlo", "starttls", "rset"]);

/**
 * Whether a failure is final. A 5xx reply to MAIL FROM, RCPT TO or DATA is: the receiver has
 * refused the sender, the mailbox or the content for good. Everything else is temporary: a
 * 4xx anywhere, a 5xx before the transaction (a greeting or EHLO refused, a host that will not
 * speak to us, which another MX or a later try may not share), and every failure without a
 * reply (refused or reset connections, timeouts, TLS failures).
 */
export function classify(f: Failure): Classified {
  const hint = f.reply ? retryAfterHint(f.reply.text) : undefined;
  const tryNextHost = HOST_STAGES.has(f.stage);
  if (f.reply && f.reply.code >= 500 && !tryNextHost && f.stage !== "queue") {
    return { verdict: "permanent", aboutMailbox: aboutMailbox(f.stage, f.reply), tryNextHost: false };
  }
  return { verdict: "temporary", aboutMailbox: false, tryNextHost, retryAfterMs: hint };
}

/**
 * Whether a permanent refusal is about the mailbox itself, which puts it on bounce cooldown:
 * by the enhanced code, its subject 1 (addressing: no such mailbox) or 2 (the mailbox:
 * disabled); a refusal of the sender (MAIL FROM), the content (X.6.X), for policy or security
 * (X.7.X) or of the system (X.3.X) is the message's, never the mailbox's. Without an enhanced
 * code, a 5xx to RCPT TO is taken as the mailbox's, as receivers that predate RFC 3463 mean it.
 */
export function aboutMailbox(stage: Stage, reply: Reply): boolean {
  if (stage !== "rcpt" && stage !== "data") return false;
  if (reply.enhanced === undefined) return stage === "rcpt";
  const subject = reply.enhanced.split(".")[1];
  return subject === "1" || subject === "2";
}

/** A reply from an error of the SMTP client, when it carries one. */
export function replyOf(text: string | undefined): Reply | undefined {
  return text === undefined ? undefined : parseReply(text);
}

/** The one line that says what became of an attempt, for logs and the ack's detail. */
export function describe(a: Attempt): string {
  const where = a.host
    ? ` (${a.host}${a.address ? ` [${a.address}]` : ""}${a.tls === "none" ? "" : `, TLS ${a.tls}`})`
    : "";
  const what = a.reply ?? a.error ?? a.verdict;
  return `${a.stage}: ${what.replace(/\s*\n\s*/g, " ")}${where}`;
}
