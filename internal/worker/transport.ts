import { createPrivateKey, type KeyObject } from "node:crypto";
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createTransport } from "nodemailer";
import { type DiskSpace, diskFullCode, isDiskFull, makeDir } from "../diskspace/diskspace";
import type { DkimAlgorithm } from "../dkim/keys";
import { type DkimSigningKey, signMessage } from "../dkim/sign";
import { DeliveryOutcome, type LeaseResponse, type SigningKey } from "../gen/mailcore/limiter/v1/mail_pb";
import { type Classification, classify as classifyRefusal } from "../feedback/classify";
import { domainOf, fixtureKind } from "../mail/policy";
import type { DeliveryAttemptRecord } from "../model/history";
import { parseReply } from "../mx/reply";

export interface DeliveryResult {
  outcome: DeliveryOutcome;
  detail: string;
  /** For a refusal or a failure: what it means for the mailbox (internal/feedback's classification). */
  bounce?: Classification;
  /** For DEFERRED: the wait the receiver asked for. */
  retryAfterMs?: number;
  /** The tries at receivers this delivery made (the MX transport, the relay). */
  attempts?: DeliveryAttemptRecord[];
}

/**
 * The ack's outcome for a refusal, from the one classification of refusals: hard is a bounce
 * (the mailbox goes on cooldown); soft and policy when final are a rejection (the message
 * fails, no cooldown: the content, a policy, the sender or our configuration, a full mailbox);
 * transient is a deferral.
 */
export function outcomeOfRefusal(c: Classification): DeliveryOutcome {
  if (c.type === "transient") return DeliveryOutcome.DEFERRED;
  return c.type === "hard" ? DeliveryOutcome.BOUNCED : DeliveryOutcome.REJECTED;
}

/** A message composed (MIME) ahead of its turn. */
export interface Prepared {
  m: LeaseResponse;
  raw: Buffer;
}

/**
 * Where a worker delivers a leased message: composed ahead (prepare), sent at its lane's turn
 * (send), so what the relay sees keeps to the lane's pacing, not to the composing's.
 */
export interface Transport {
  readonly name: string;
  /**
   * Whether its deferrals are retried on the schedule in hours (MX delivery: we are the last
   * MTA) rather than the short one (the relay, which retries what it took itself; the sink).
   */
  readonly retryInHours: boolean;
  prepare(m: LeaseResponse): Promise<Prepared>;
  send(p: Prepared): Promise<DeliveryResult>;
  close(): void;
}

/** The message id is the Message-ID, so a redelivery is recognisable downstream. */
export function messageIdHeader(m: LeaseResponse): string {
  return `<${m.messageId}@${domainOf(m.email!.fromAddress)}>`;
}

/** MAIL FROM of a message: the return path its lease carries, or its From address when the lease has none. */
export function returnPathOf(m: LeaseResponse): string {
  return m.returnPath || m.email!.fromAddress;
}

/** The envelope: from the return path, to the message's one recipient. */
const envelopeOf = (m: LeaseResponse) => ({ from: returnPathOf(m), to: [m.email!.toAddress] });

/** The worker's opened keys, by their DER (a key under a selector never changes; a new one is a new entry). */
const openedKeys = new Map<string, KeyObject>();
const OPENED_KEYS_MAX = 1_000;

function signingKeyOf(k: SigningKey): DkimSigningKey {
  const id = `${k.algorithm}:${Buffer.from(k.privateKey).toString("base64")}`;
  let key = openedKeys.get(id);
  if (key === undefined) {
    if (openedKeys.size >= OPENED_KEYS_MAX) openedKeys.clear();
    key = createPrivateKey({ key: Buffer.from(k.privateKey), format: "der", type: "pkcs8" });
    openedKeys.set(id, key);
  }
  return { domain: k.domain, selector: k.selector, algorithm: k.algorithm as DkimAlgorithm, privateKey: key };
}

/**
 * A composed message signed with its lease's keys, last: nothing changes its bytes afterwards.
 * A lease without keys (a message to a fixture address, which the worker simulates and never
 * sends, or a test's lease) leaves it unsigned; a lease with keys that cannot sign it fails the
 * composing, and the message is retried: it is never sent unsigned.
 */
export function signed(m: LeaseResponse, raw: Buffer): Buffer {
  return m.signingKeys.length === 0 ? raw : signMessage(raw, m.signingKeys.map(signingKeyOf));
}

/**
 * Composes a leased message with nodemailer (CRLF line ends, as SMTP sends them) and signs it:
 * every transport sends, or writes, these bytes.
 */
export function composer() {
  const compose = createTransport({ streamTransport: true, buffer: true, newline: "windows" });
  // A first composition takes 15 ms (nodemailer's code not yet compiled): made now, at start,
  // not for the first message, which may be a one-time code after an idle hour.
  void compose.sendMail({ from: "warm@example.org", to: "up@example.org", subject: "-", text: "-", html: "<p>-</p>" });
  return async (m: LeaseResponse): Promise<Prepared> => {
    const e = m.email!;
    const info = await compose.sendMail({
      messageId: messageIdHeader(m),
      from: e.from,
      to: e.to,
      replyTo: e.replyTo || undefined,
      subject: e.subject,
      html: e.html || undefined,
      text: e.text || undefined,
      headers: { ...e.headers, ...(e.tags.length > 0 ? { "X-Mailcore-Tags": e.tags.join(", ") } : {}) },
      envelope: envelopeOf(m),
    });
    return { m, raw: signed(m, info.message as Buffer) };
  };
}

/**
 * Writes each message as DATA_DIR/sink/<message id>.eml (a redelivery overwrites the same file),
 * as a final delivery does: a Return-Path field with the envelope sender first, then the
 * message's bytes as they were signed.
 */
export class FileSink implements Transport {
  readonly name = "file sink";
  readonly retryInHours = false;
  readonly prepare = composer();

  /** Whether the directory is there: a worker started on a full disk makes it at its first write. */
  private made: boolean;

  /** disk: where a write refused for want of space is noted; the message is then deferred (retried). */
  constructor(
    private readonly dir: string,
    private readonly disk?: DiskSpace,
  ) {
    this.made = makeDir(dir, "sink", disk);
  }

  /** At once, in the turn it is called in: the file's time is the turn's. */
  async send({ m, raw }: Prepared): Promise<DeliveryResult> {
    const path = join(this.dir, `${m.messageId}.eml`);
    try {
      if (!this.made) {
        mkdirSync(this.dir, { recursive: true });
        this.made = true;
      }
      writeFileSync(`${path}.tmp`, Buffer.concat([Buffer.from(`Return-Path: <${returnPathOf(m)}>\r\n`), raw]));
    } catch (err) {
      rmSync(`${path}.tmp`, { force: true });
      if (!isDiskFull(err)) throw err;
      this.disk?.noted("sink", err);
      return {
        outcome: DeliveryOutcome.DEFERRED,
        detail: `the sink's disk is full (${diskFullCode(err)}); retried`,
      };
    }
    renameSync(`${path}.tmp`, path);
    return { outcome: DeliveryOutcome.DELIVERED, detail: `written to ${path}` };
  }

  close(): void {}
}

/** The stage of a relay session a nodemailer command stands for, as the history names them. */
const RELAY_STAGES: Record<string, string> = {
  CONN: "connect",
  EHLO: "ehlo",
  HELO: "ehlo",
  STARTTLS: "starttls",
  "MAIL FROM": "mail",
  "RCPT TO": "rcpt",
  DATA: "data",
};

/**
 * What a relay's refusal means for the message, by the one classification of refusals (told
 * the command refused): a 5xx to RCPT TO or DATA about the mailbox is a bounce, one about the
 * content or a policy a rejection; a 5xx before (the greeting, AUTH, MAIL FROM: the relay or our
 * configuration refuses, never the recipient) is a rejection too, the message failing at once
 * with the reason instead of after its retries; a 4xx or a connection failure is a deferral.
 */
export function classifyRelayError(
  e: { responseCode?: number; response?: string; code?: string; command?: string; message: string },
  relayHost = "",
  atMs = Date.now(),
): DeliveryResult {
  const detail = e.response ?? `${e.code ?? "error"}: ${e.message}`;
  const bounce = classifyRefusal({ reply: e.responseCode, text: detail, command: e.command });
  const stage = e.command?.startsWith("AUTH") ? "ehlo" : (RELAY_STAGES[e.command ?? ""] ?? "connect");
  const attempt = relayAttempt(relayHost, atMs, stage, detail, bounce.status);
  return { outcome: outcomeOfRefusal(bounce), detail, bounce, attempts: [attempt] };
}

function relayAttempt(
  host: string,
  atMs: number,
  stage: string,
  reply: string,
  status?: string,
): DeliveryAttemptRecord {
  return { atMs, host, address: "", tls: "", stage, reply, enhancedCode: status ?? "" };
}

/**
 * Sends through an SMTP relay; refusals are classified by classifyRelayError. A deferral
 * follows the short schedule: the relay retries the mail it took itself, ours only covers the
 * relay being unreachable or refusing for now.
 */
export class SmtpRelay implements Transport {
  readonly name: string;
  readonly retryInHours = false;
  readonly prepare = composer();
  private readonly transporter;
  private readonly host: string;

  constructor(url: string) {
    const u = new URL(url);
    this.name = `SMTP relay ${u.host}`;
    this.host = u.hostname;
    this.transporter = createTransport({
      pool: true,
      host: u.hostname,
      port: Number(u.port || (u.protocol === "smtps:" ? 465 : 587)),
      secure: u.protocol === "smtps:",
      auth: u.username ? { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } : undefined,
      maxConnections: 4,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    });
  }

  async send({ m, raw }: Prepared): Promise<DeliveryResult> {
    const atMs = Date.now();
    try {
      const info = await this.transporter.sendMail({ envelope: envelopeOf(m), raw });
      const status = parseReply(info.response)?.enhanced;
      return {
        outcome: DeliveryOutcome.DELIVERED,
        detail: info.response,
        attempts: [relayAttempt(this.host, atMs, "data", info.response, status)],
      };
    } catch (err) {
      return classifyRelayError(err as Error, this.host, atMs);
    }
  }

  close(): void {
    this.transporter.close();
  }
}

/** Fixture addresses never leave the worker: their outcome is simulated, a refusal classified as a real one would be. */
export function simulateFixture(m: LeaseResponse): DeliveryResult | undefined {
  const refused = (outcome: DeliveryOutcome, detail: string): DeliveryResult => ({
    outcome,
    detail,
    bounce: classifyRefusal({ text: detail }),
  });
  switch (fixtureKind(m.email!.toAddress)) {
    case undefined:
      return undefined;
    case "bounced":
      return refused(DeliveryOutcome.BOUNCED, "simulated: 550 5.1.1 fixture mailbox bounced");
    case "deferred":
      return refused(DeliveryOutcome.DEFERRED, "simulated: 451 4.3.0 fixture mailbox deferred");
    case "complained":
      return { outcome: DeliveryOutcome.DELIVERED, detail: "simulated: delivered; the recipient complained" };
    case "delivered":
      return { outcome: DeliveryOutcome.DELIVERED, detail: "simulated: delivered" };
  }
}
