import { simpleParser } from "mailparser";
import { randomBytes } from "node:crypto";
import type { SMTPServerDataStream, SMTPServerSession } from "smtp-server";
import { MAX_MESSAGE_BYTES } from "../limits/limits";
import type { ApiClient } from "./api";
import type { SubmissionFront } from "./front";
import { PARSE_OPTIONS, toSendRequest } from "./message";
import { apiReply, dataAborted, handlingFailed, invalidMessage, type Reply, replyLine, tooLarge } from "./replies";

// DATA, then the forward: the message read (and not a byte past the limit), parsed as MIME,
// converted by message.ts and sent to POST /api/v1/emails, whose answer is the reply.

/** A message's bytes, kept up to the limit and not a byte more; past it the rest is dropped as it comes. */
export class MessageBuffer {
  private chunks: Buffer[] = [];
  private kept = 0;
  /** The message was larger than the limit. */
  overflowed = false;

  constructor(private readonly limit = MAX_MESSAGE_BYTES) {}

  add(chunk: Buffer): void {
    if (this.overflowed) return;
    if (this.kept + chunk.length > this.limit) {
      this.overflowed = true;
      this.chunks = [];
      return;
    }
    this.chunks.push(chunk);
    this.kept += chunk.length;
  }

  /** The message, handed over once: the buffer keeps nothing after. */
  take(): Buffer {
    const message = Buffer.concat(this.chunks, this.kept);
    this.chunks = [];
    return message;
  }
}

/** The transaction's envelope: its sender (empty for <>) and its one recipient. */
export function envelopeOf(session: SMTPServerSession): { mailFrom: string; rcptTo: string } {
  return {
    mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
    rcptTo: session.envelope.rcptTo[0]!.address,
  };
}

/** What a message is forwarded with. */
export interface Submission {
  message: Buffer;
  envelope: { mailFrom: string; rcptTo: string };
  /** The session's API token. */
  token: string;
  clientIp: string;
  requestId: string;
}

/** A message parsed, converted and sent to the API: the reply its answer calls for. */
export async function forward(api: ApiClient, m: Submission): Promise<Reply & { messageId?: string }> {
  let parsed: Awaited<ReturnType<typeof simpleParser>>;
  try {
    parsed = await simpleParser(m.message, PARSE_OPTIONS);
  } catch (err) {
    return invalidMessage(`the message could not be parsed as MIME (${(err as Error).message})`);
  }
  const request = toSendRequest(parsed, m.envelope);
  if (!request.ok) return request.reply;
  const answer = await api.send({
    token: m.token,
    json: request.json,
    idempotencyKey: request.idempotencyKey,
    clientIp: m.clientIp,
    requestId: m.requestId,
  });
  return apiReply(answer, Date.now(), request.idempotencyKey !== undefined);
}

/** onData: the message read, forwarded, and answered once; a close asked for meanwhile comes after the answer. */
export function data(
  front: SubmissionFront,
  stream: SMTPServerDataStream,
  session: SMTPServerSession,
  done: (err?: Error | null, message?: string) => void,
): void {
  const { log } = front;
  const s = front.state(session);
  const started = Date.now();
  const requestId = `smtp_${randomBytes(12).toString("hex")}`;
  const buffer = new MessageBuffer();
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
      front.counted(250);
      done(null, replyLine(reply));
    } else {
      log.info("refused", { ...fields, reply: `${reply.code} ${reply.status}`, reason: reply.text });
      done(front.refusal(reply));
    }
    const closeWith = s.closeWith;
    if (closeWith) setImmediate(() => front.closeSession(session, closeWith));
  };

  stream.on("data", (chunk: Buffer) => buffer.add(chunk));
  // The client went away or timed out mid-DATA: nothing is forwarded.
  stream.on("error", () => finish(dataAborted()));
  stream.on("end", () => {
    if (finished) return;
    if (buffer.overflowed || stream.sizeExceeded) return finish(tooLarge());
    const submission = {
      message: buffer.take(),
      envelope: envelopeOf(session),
      token: s.token!,
      clientIp: session.remoteAddress,
      requestId,
    };
    forward(front.deps.api, submission)
      .then(finish)
      .catch((err: Error) => {
        log.error("message handling failed", { session: session.id, error: err.message });
        finish(handlingFailed());
      });
  });
}
