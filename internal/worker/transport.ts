import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createTransport } from "nodemailer";
import { type DiskSpace, diskFullCode, isDiskFull, makeDir } from "../diskspace/diskspace";
import { DeliveryOutcome, type LeaseResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import { domainOf, fixtureKind } from "../mail/policy";

export interface DeliveryResult {
  outcome: DeliveryOutcome;
  detail: string;
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
  prepare(m: LeaseResponse): Promise<Prepared>;
  send(p: Prepared): Promise<DeliveryResult>;
  close(): void;
}

/** The message id is the Message-ID, so a redelivery is recognisable downstream. */
export function messageIdHeader(m: LeaseResponse): string {
  return `<${m.messageId}@${domainOf(m.email!.fromAddress)}>`;
}

/** The envelope is the message's one recipient. */
const envelopeOf = (m: LeaseResponse) => ({ from: m.email!.fromAddress, to: [m.email!.toAddress] });

/** Composes a leased message with nodemailer, with the given line ends. */
function composer(newline: "unix" | "windows") {
  const compose = createTransport({ streamTransport: true, buffer: true, newline });
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
    return { m, raw: info.message as Buffer };
  };
}

/** Writes each message as DATA_DIR/sink/<message id>.eml (a redelivery overwrites the same file). */
export class FileSink implements Transport {
  readonly name = "file sink";
  readonly prepare = composer("unix");

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
      writeFileSync(`${path}.tmp`, raw);
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

/**
 * What a relay's refusal means for the message. Only a permanent (5xx) refusal of the
 * recipient or of the message itself is a hard bounce of the mailbox; a 5xx anywhere else
 * (AUTH, MAIL FROM, the greeting: the relay or our configuration is at fault) and every 4xx or
 * connection failure is temporary, so it is retried and finally fails, and no recipient is put
 * on bounce cooldown for a problem that is not theirs.
 */
export function classifyRelayError(e: {
  responseCode?: number;
  response?: string;
  code?: string;
  command?: string;
  message: string;
}): DeliveryResult {
  const detail = e.response ?? `${e.code ?? "error"}: ${e.message}`;
  const permanent = e.responseCode !== undefined && e.responseCode >= 500;
  const aboutRecipientOrMessage = e.command === "RCPT TO" || e.command === "DATA";
  return { outcome: permanent && aboutRecipientOrMessage ? DeliveryOutcome.BOUNCED : DeliveryOutcome.DEFERRED, detail };
}

/** Sends through an SMTP relay; refusals are classified by classifyRelayError. */
export class SmtpRelay implements Transport {
  readonly name: string;
  readonly prepare = composer("windows");
  private readonly transporter;

  constructor(url: string) {
    const u = new URL(url);
    this.name = `SMTP relay ${u.host}`;
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
    try {
      const info = await this.transporter.sendMail({ envelope: envelopeOf(m), raw });
      return { outcome: DeliveryOutcome.DELIVERED, detail: info.response };
    } catch (err) {
      return classifyRelayError(err as Error);
    }
  }

  close(): void {
    this.transporter.close();
  }
}

/** Fixture addresses never leave the worker: their outcome is simulated. */
export function simulateFixture(m: LeaseResponse): DeliveryResult | undefined {
  switch (fixtureKind(m.email!.toAddress)) {
    case undefined:
      return undefined;
    case "bounced":
      return { outcome: DeliveryOutcome.BOUNCED, detail: "simulated: 550 5.1.1 fixture mailbox bounced" };
    case "deferred":
      return { outcome: DeliveryOutcome.DEFERRED, detail: "simulated: 451 4.3.0 fixture mailbox deferred" };
    case "complained":
      return { outcome: DeliveryOutcome.DELIVERED, detail: "simulated: delivered; the recipient complained" };
    case "delivered":
      return { outcome: DeliveryOutcome.DELIVERED, detail: "simulated: delivered" };
  }
}
