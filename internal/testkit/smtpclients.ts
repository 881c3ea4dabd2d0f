// Real SMTP clients for the tests and the benchmark: nodemailer, swaks (a process), and a
// raw line client for what neither of those will do (AUTH in cleartext, stalling mid-DATA).
import { spawn } from "bun";
import { writeFileSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { join } from "node:path";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { createTransport } from "nodemailer";
import { tempDir } from "./testkit";

/** One SMTP reply, split. */
export interface ParsedReply {
  code: number;
  status: string;
  text: string;
}

/** What a client got: the first refusal (if any) and the queued message (if any). */
export interface Outcome {
  failure?: ParsedReply;
  queued?: ParsedReply & { id: string };
  /** What the client printed or threw, for failure messages. */
  transcript: string;
}

export function parseReply(line: string | undefined): ParsedReply | undefined {
  const m = /^(\d{3})[ -](?:(\d\.\d{1,3}\.\d{1,3}) )?([^\r\n]*)/.exec(line?.trim() ?? "");
  return m ? { code: Number(m[1]), status: m[2] ?? "", text: m[3]! } : undefined;
}

const MESSAGE_ID = /\b(msg_[0-9a-f]{24})\b/;

function queuedFrom(line: string | undefined): Outcome["queued"] {
  const r = parseReply(line);
  const id = r && r.code === 250 ? MESSAGE_ID.exec(r.text)?.[1] : undefined;
  return r && id ? { ...r, id } : undefined;
}

export interface Submission {
  port: number;
  /** Another loopback address (127.0.0.2) to connect from, playing another client. */
  localAddress?: string;
  /** undefined: no AUTH at all. */
  user?: string;
  pass?: string;
  /** false: no STARTTLS (and so, with this server, no AUTH offered). */
  tls?: boolean;
  /** Envelope. */
  mailFrom: string;
  to: string[];
  /** A message built by the client from these... */
  from?: string;
  subject?: string;
  text?: string;
  html?: string;
  /** Attachments as (file name, content). */
  attachments?: { filename: string; content: string }[];
  /** ...or the raw message (CRLF line ends, no leading dots). */
  raw?: Buffer | string;
}

/** Sends with nodemailer, one connection per call. */
export async function viaNodemailer(s: Submission): Promise<Outcome> {
  const transport = createTransport({
    host: "127.0.0.1",
    port: s.port,
    localAddress: s.localAddress,
    secure: false,
    ignoreTLS: s.tls === false,
    requireTLS: s.tls !== false,
    tls: { rejectUnauthorized: false },
    auth: s.user !== undefined ? { user: s.user, pass: s.pass ?? "" } : undefined,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  try {
    const envelope = { from: s.mailFrom, to: s.to };
    const info = await transport.sendMail(
      s.raw !== undefined
        ? { envelope, raw: s.raw }
        : {
            envelope,
            from: s.from,
            to: s.to[0],
            subject: s.subject,
            text: s.text,
            html: s.html,
            attachments: s.attachments,
          },
    );
    const rejected = (info as { rejectedErrors?: { response?: string }[] }).rejectedErrors ?? [];
    return {
      failure: parseReply(rejected[0]?.response),
      queued: queuedFrom(info.response),
      transcript: JSON.stringify(info),
    };
  } catch (err) {
    const e = err as Error & { response?: string; responseCode?: number; code?: string };
    const failure = parseReply(e.response) ?? {
      code: e.responseCode ?? 0,
      status: "",
      text: `${e.code ?? ""} ${e.message}`,
    };
    return { failure, transcript: `${e.code}: ${e.message}` };
  } finally {
    transport.close();
  }
}

let swaksFiles: string | undefined;

/** Sends with swaks, a process of its own. */
export async function viaSwaks(s: Submission): Promise<Outcome> {
  const args = [
    "swaks",
    "--server",
    `127.0.0.1:${s.port}`,
    "--timeout",
    "15",
    "--from",
    s.mailFrom,
    "--to",
    s.to.join(","),
  ];
  if (s.localAddress !== undefined) args.push("--local-interface", s.localAddress);
  if (s.tls !== false) args.push("--tls");
  if (s.user !== undefined) args.push("--auth-user", s.user, "--auth-password", s.pass ?? "");
  if (s.raw !== undefined) {
    // Without fixups swaks sends the file as is and only adds the last CRLF after the dot.
    swaksFiles ??= tempDir("mailcore-swaks-");
    const file = join(swaksFiles, `${crypto.randomUUID()}.eml`);
    writeFileSync(file, Buffer.concat([Buffer.from(s.raw), Buffer.from(".")]));
    args.push("--data", `@${file}`, "--no-data-fixup", "--suppress-data");
  } else {
    if (s.from) args.push("--h-From", s.from);
    if (s.subject) args.push("--h-Subject", s.subject);
    if (s.html !== undefined) {
      if (s.text !== undefined) args.push("--attach-type", "text/plain", "--attach-body", s.text);
      args.push("--attach-type", "text/html", "--attach-body", s.html);
    } else if (s.text !== undefined) {
      args.push("--body", s.text);
    }
    for (const a of s.attachments ?? []) {
      swaksFiles ??= tempDir("mailcore-swaks-");
      const file = join(swaksFiles, a.filename);
      writeFileSync(file, a.content);
      args.push("--attach-type", "application/octet-stream", "--attach", `@${file}`);
    }
  }
  const proc = spawn(args, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [out, errOut] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  const transcript = out + errOut;
  if (/requires Net::SSLeay/.test(transcript)) {
    throw new Error(
      "swaks cannot do STARTTLS here: install its TLS module (sudo apt-get install -y libnet-ssleay-perl)",
    );
  }
  // Server lines are "<- 250 ..." (cleartext), "<~ 250 ..." (TLS), with a "*" for an error.
  const replies = transcript
    .split("\n")
    .map((l) => /^<[~-]?\*?\*?\s+(\d{3} .*)$/.exec(l)?.[1])
    .filter((l): l is string => l !== undefined)
    .map((l) => parseReply(l)!);
  const failure =
    replies.find((r) => r.code >= 400) ??
    (/^\*\*\* (.*)$/m.exec(transcript)
      ? { code: 0, status: "", text: /^\*\*\* (.*)$/m.exec(transcript)![1]! }
      : undefined);
  const queued = replies.map((r) => queuedFrom(`${r.code} ${r.status} ${r.text}`)).find((q) => q !== undefined);
  return { failure, queued, transcript };
}

export const CLIENTS = { nodemailer: viaNodemailer, swaks: viaSwaks } as const;
export type ClientName = keyof typeof CLIENTS;

/** A line-level SMTP client: sends what it is told, reads whole replies, can STARTTLS. */
export class RawSmtp {
  private buf = "";
  private wake: (() => void) | undefined;
  private ended = false;
  readonly closed: Promise<void>;
  private closedResolve!: () => void;

  private constructor(private socket: Socket | TLSSocket) {
    this.closed = new Promise((ok) => (this.closedResolve = ok));
    this.attach(socket);
  }

  /** localAddress: another loopback address (127.0.0.2) plays another client. */
  static async connect(port: number, localAddress?: string): Promise<RawSmtp> {
    const socket = netConnect({ host: "127.0.0.1", port, localAddress });
    await new Promise<void>((ok, fail) => socket.once("connect", ok).once("error", fail));
    return new RawSmtp(socket);
  }

  private attach(socket: Socket | TLSSocket) {
    socket.on("data", (chunk: Buffer) => {
      this.buf += chunk.toString("latin1");
      this.wake?.();
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      this.ended = true;
      this.closedResolve();
      this.wake?.();
    });
  }

  /** The next whole reply (all its lines); rejects after timeoutMs or when the connection closes first. */
  async read(timeoutMs = 5_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const lines = this.buf.split("\r\n");
      const last = lines.findIndex((l) => /^\d{3}( |$)/.test(l));
      if (last >= 0) {
        const reply = lines.slice(0, last + 1).join("\r\n");
        this.buf = lines.slice(last + 1).join("\r\n");
        return reply;
      }
      if (this.ended) throw new Error(`connection closed before a reply (got ${JSON.stringify(this.buf)})`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no reply within ${timeoutMs} ms`);
      await new Promise<void>((ok) => {
        const t = setTimeout(ok, left);
        this.wake = () => {
          clearTimeout(t);
          ok();
        };
      });
      this.wake = undefined;
    }
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  async cmd(line: string): Promise<string> {
    this.write(`${line}\r\n`);
    return this.read();
  }

  async greetingAndEhlo(): Promise<string> {
    await this.read();
    return this.cmd("EHLO raw.test");
  }

  async starttls(): Promise<void> {
    const r = await this.cmd("STARTTLS");
    if (!r.startsWith("220")) throw new Error(`STARTTLS: ${r}`);
    this.socket.removeAllListeners("data");
    this.socket.removeAllListeners("close");
    const secure = tlsConnect({ socket: this.socket as Socket, rejectUnauthorized: false, servername: "localhost" });
    await new Promise<void>((ok, fail) => secure.once("secureConnect", ok).once("error", fail));
    this.socket = secure;
    this.attach(secure);
  }

  /** Greeting, EHLO, STARTTLS, EHLO, AUTH PLAIN; returns the AUTH reply. */
  async login(user: string, token: string): Promise<string> {
    await this.greetingAndEhlo();
    await this.starttls();
    await this.cmd("EHLO raw.test");
    return this.cmd(`AUTH PLAIN ${Buffer.from(`\0${user}\0${token}`).toString("base64")}`);
  }

  destroy(): void {
    this.socket.destroy();
  }
}
