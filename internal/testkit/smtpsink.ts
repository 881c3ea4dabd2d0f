// An SMTP server for tests that keeps every message it accepts with its envelope, and refuses
// what the test says to refuse, at RCPT or after DATA (smtp-server). Listens on a loopback address
// of the test's choice (127.0.0.x) and a port the kernel picks.
import { SMTPServer } from "smtp-server";

export interface SinkMessage {
  /** The envelope sender; "" for the null sender. */
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
}

/** A refusal: the reply code and its text (an enhanced code, if any, starts the text). */
export interface Refusal {
  code: number;
  text: string;
}

export interface SinkOptions {
  host?: string;
  /** Refuses a recipient at RCPT TO. */
  atRcpt?: (rcpt: string) => Refusal | undefined;
  /** Refuses the message after its data (by its recipients). */
  atData?: (rcptTo: string[]) => Refusal | undefined;
}

export interface SmtpSink {
  host: string;
  port: number;
  received: SinkMessage[];
  stop(): Promise<void>;
}

const refusal = (r: Refusal) => Object.assign(new Error(r.text), { responseCode: r.code });

export async function startSmtpSink(opts: SinkOptions = {}): Promise<SmtpSink> {
  const host = opts.host ?? "127.0.0.1";
  const received: SinkMessage[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(address, _session, done) {
      const r = opts.atRcpt?.(address.address);
      done(r ? refusal(r) : undefined);
    },
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const rcptTo = session.envelope.rcptTo.map((r) => r.address);
        const r = opts.atData?.(rcptTo);
        if (r) return done(refusal(r));
        const from = session.envelope.mailFrom;
        received.push({ mailFrom: from ? from.address : "", rcptTo, raw: Buffer.concat(chunks) });
        done();
      });
    },
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(0, host, () => ok());
  });
  const { port } = server.server.address() as { port: number };
  return {
    host,
    port,
    received,
    stop: () => Promise.race([new Promise<void>((ok) => server.close(() => ok())), Bun.sleep(1_000)]),
  };
}
