// What one delivery attempt's end means for the message: delivered, a permanent failure (final
// at once) or a temporary one (retried later), decided from where in the session it ended and
// what the receiver replied. Pure: a table of sessions' ends tests it.
import { type Classification, classify as classifyRefusal } from "../feedback/classify";
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
  /**
   * What the failure means for the mailbox, by the one classification of refusals
   * (internal/feedback): hard (the mailbox's, for good), soft, policy (the sender's or the
   * message's), or transient (a temporary failure).
   */
  bounce: Classification;
  /** Whether the failure is the host's (the next MX host may do better) rather than the transaction's. */
  tryNextHost: boolean;
  /** The wait the reply asks for, in ms. */
  retryAfterMs?: number;
}

// Stages before a transaction starts: what fails there is the host or the channel, not the message.
const HOST_STAGES = new Set<Stage>(["connect", "greeting", "ehlo", "starttls", "rset"]);

// The command of each stage, as the classification of refusals names it: only a refusal at RCPT
// TO or DATA can be about the recipient.
const COMMAND_OF_STAGE: Record<Stage, string> = {
  connect: "CONN",
  greeting: "CONN",
  ehlo: "EHLO",
  starttls: "STARTTLS",
  rset: "RSET",
  mail: "MAIL FROM",
  rcpt: "RCPT TO",
  data: "DATA",
  queue: "CONN",
};

/**
 * Whether a failure is final, and what it means. A 5xx reply to MAIL FROM, RCPT TO or DATA is
 * final: the receiver has refused the sender, the mailbox or the content for good. Everything
 * else is temporary: a 4xx anywhere, a 5xx before the transaction (a greeting or EHLO refused,
 * a host that will not speak to us, which another MX or a later try may not share), and every
 * failure without a reply (refused or reset connections, timeouts, TLS failures). Which kind of
 * refusal a final one is (the mailbox's or the message's) is internal/feedback's classify, the
 * one the relay and bounce messages use too, told the command the stage stands for.
 */
export function classify(f: Failure): Classified {
  const tryNextHost = HOST_STAGES.has(f.stage);
  const final = f.reply !== undefined && f.reply.code >= 500 && !tryNextHost && f.stage !== "queue";
  const bounce = classifyRefusal({
    reply: f.reply?.code,
    text: f.reply?.text ?? f.error,
    command: COMMAND_OF_STAGE[f.stage],
    final,
  });
  if (final) return { verdict: "permanent", bounce, tryNextHost: false };
  const hint = f.reply ? retryAfterHint(f.reply.text) : undefined;
  return { verdict: "temporary", bounce, tryNextHost, retryAfterMs: hint };
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
