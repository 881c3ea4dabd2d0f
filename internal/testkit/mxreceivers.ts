// Receiving MX hosts for delivery tests, each on a loopback address of its own (127.0.0.2,
// 127.0.0.3, ...) and the port the test picks: well-behaved ones (smtp-server, with STARTTLS
// under a certificate the test chooses) and broken or hostile ones (raw node:net servers that
// do exactly what the test says). A certificate authority of the tests' own signs valid and
// expired certificates, so "verified TLS" is tested without the system's roots.
import { createServer, type Server, type Socket } from "node:net";
import { generate } from "selfsigned";
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";

export interface TestCa {
  /** The CA's certificate, to trust. */
  cert: string;
  /** A certificate for names, signed by the CA; expired when asked. */
  issue(names: string[], opts?: { expired?: boolean }): Promise<{ key: string; cert: string }>;
}

export async function testCa(): Promise<TestCa> {
  const now = Date.now();
  const ca = await generate([{ name: "commonName", value: "mailcore test CA" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: new Date(now - 86_400_000),
    notAfterDate: new Date(now + 86_400_000),
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return {
    cert: ca.cert,
    async issue(names, opts = {}) {
      const pems = await generate([{ name: "commonName", value: names[0]! }], {
        keyType: "ec",
        algorithm: "sha256",
        ca: { key: ca.private, cert: ca.cert },
        notBeforeDate: new Date(now - (opts.expired ? 3 : 1) * 86_400_000),
        notAfterDate: new Date(now + (opts.expired ? -2 : 1) * 86_400_000),
        extensions: [
          { name: "basicConstraints", cA: false },
          { name: "keyUsage", digitalSignature: true, critical: true },
          { name: "extKeyUsage", serverAuth: true },
          { name: "subjectAltName", altNames: names.map((value) => ({ type: 2 as const, value })) },
        ],
      });
      return { key: pems.private, cert: pems.cert };
    },
  };
}

export interface ReceivedMessage {
  from: string;
  to: string;
  raw: Buffer;
  /** Whether the session was under TLS. */
  secure: boolean;
  /** The session's EHLO name. */
  helo: string;
  /** Which connection (one per session) it came on. */
  connection: string;
  /** When its final dot was read (ms). */
  at: number;
}

export interface MxReceiver {
  address: string;
  received: ReceivedMessage[];
  /** Connections open now, and the most ever open at once. */
  open(): number;
  maxOpen(): number;
  /** Connections accepted in all. */
  connections(): number;
  stop(): Promise<void>;
}

export interface MxReceiverOptions {
  address: string;
  port: number;
  /** STARTTLS with this certificate; false: no STARTTLS. Default: smtp-server's own self-signed one. */
  tls?: { key: string; cert: string } | false;
  /** Refuses a recipient (its reply, e.g. "550 5.1.1 No such user"), or undefined to accept. */
  rcpt?(to: string, nth: number): string | undefined;
  /** How long the receiver takes to answer a message's final dot (a slow receiver). */
  dataDelayMs?: number;
  /** The reply to a message's final dot, or undefined for 250; "hang" never answers. */
  data?(to: string, nth: number): string | "hang" | undefined;
}

const replyError = (reply: string) =>
  Object.assign(new Error(reply.slice(4)), { responseCode: Number(reply.slice(0, 3)) });

/** An smtp-server MX on opts.address:opts.port that records what it receives and how many connections it has. */
export async function startMxReceiver(opts: MxReceiverOptions): Promise<MxReceiver> {
  const received: ReceivedMessage[] = [];
  const counts = { open: 0, maxOpen: 0, total: 0 };
  const rcptSeen = new Map<string, number>();
  const dataSeen = new Map<string, number>();
  const nth = (m: Map<string, number>, k: string) => {
    const n = (m.get(k) ?? 0) + 1;
    m.set(k, n);
    return n;
  };
  const options: SMTPServerOptions = {
    authOptional: true,
    disabledCommands: ["AUTH", ...(opts.tls === false ? ["STARTTLS"] : [])],
    ...(opts.tls ? { key: opts.tls.key, cert: opts.tls.cert } : {}),
    logger: false,
    size: 50 * 1024 * 1024,
    onConnect(_session, done) {
      counts.total++;
      counts.open++;
      counts.maxOpen = Math.max(counts.maxOpen, counts.open);
      done();
    },
    onClose() {
      counts.open--;
    },
    onRcptTo(address, _session, done) {
      const refusal = opts.rcpt?.(address.address, nth(rcptSeen, address.address));
      done(refusal ? replyError(refusal) : undefined);
    },
    onData(stream, session: SMTPServerSession, done) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", async () => {
        const at = Date.now();
        if (opts.dataDelayMs) await Bun.sleep(opts.dataDelayMs);
        const to = session.envelope.rcptTo[0]!.address;
        const answer = opts.data?.(to, nth(dataSeen, to));
        if (answer === "hang") return;
        if (answer) return done(replyError(answer));
        received.push({
          from: (session.envelope.mailFrom || { address: "" }).address,
          to,
          raw: Buffer.concat(chunks),
          secure: session.secure,
          helo: session.hostNameAppearsAs,
          connection: session.id,
          at,
        });
        done();
      });
    },
  };
  const server = new SMTPServer(options);
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(opts.port, opts.address, () => ok());
  });
  server.on("error", () => {}); // a client that drops its connection is not the test's failure
  return {
    address: opts.address,
    received,
    open: () => counts.open,
    maxOpen: () => counts.maxOpen,
    connections: () => counts.total,
    stop: () => Promise.race([new Promise<void>((ok) => server.close(() => ok())), Bun.sleep(1_000)]),
  };
}

export interface RawReceiver {
  address: string;
  /** Connections accepted in all. */
  connections(): number;
  /** Connections open now. */
  open(): number;
  stop(): Promise<void>;
}

/** A raw TCP server on address:port that hands each connection to the test's handler. */
export async function startRawReceiver(
  address: string,
  port: number,
  handle: (socket: Socket) => void,
): Promise<RawReceiver> {
  const sockets = new Set<Socket>();
  let total = 0;
  const server: Server = createServer((socket) => {
    total++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    handle(socket);
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(port, address, () => ok());
  });
  return {
    address,
    connections: () => total,
    open: () => sockets.size,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

/**
 * A scripted SMTP conversation for a raw receiver: greets, then answers each line the client
 * sends with what answer(line) returns (undefined: stay silent). DATA content is read up to
 * the final dot, then answer("<dot>") is asked.
 */
export function scripted(answer: (line: string, socket: Socket) => string | undefined, greeting = "220 mx.test ESMTP") {
  return (socket: Socket) => {
    socket.write(`${greeting}\r\n`);
    let buffer = "";
    let inData = false;
    socket.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("latin1");
      for (let i = buffer.indexOf("\r\n"); i >= 0; i = buffer.indexOf("\r\n")) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (inData && line !== ".") continue;
        const said = inData ? "<dot>" : line;
        inData = false;
        const reply = answer(said, socket);
        if (said.toUpperCase() === "DATA" && reply?.startsWith("354")) inData = true;
        if (reply !== undefined && !socket.destroyed) socket.write(`${reply}\r\n`);
      }
    });
  };
}

/** The answers of a plain receiver that accepts everything (no STARTTLS, no PIPELINING). */
export function acceptAll(line: string): string | undefined {
  const verb = line.split(/[ :]/, 1)[0]!.toUpperCase();
  switch (verb) {
    case "EHLO":
      return "250 mx.test";
    case "DATA":
      return "354 go ahead";
    case "QUIT":
      return "221 bye";
    case "<DOT>":
      return "250 2.0.0 queued";
    default:
      return "250 2.0.0 OK";
  }
}
