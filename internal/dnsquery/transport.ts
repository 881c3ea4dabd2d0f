import dnsPacket from "dns-packet";
import { randomInt } from "node:crypto";
import { createSocket } from "node:dgram";
import { connect, isIP } from "node:net";

// One DNS question to one server and its answer: over UDP, and over TCP when the UDP answer is
// truncated (RFC 7766). dns-packet is the codec; node:dgram and node:net carry the bytes.

/** A DNS server: an IP and a port. */
export interface DnsServer {
  host: string;
  port: number;
}

/** What came back from one server: a decoded response, or why none did. */
export type Exchange = { ok: true; response: dnsPacket.DecodedPacket } | { ok: false; detail: string };

/** The largest UDP answer we say we take (EDNS0): the size the DNS flag day 2020 settled on. */
const UDP_PAYLOAD = 1232;

/** Parses "192.0.2.53", "192.0.2.53:5353", "[2001:db8::53]:53" or "2001:db8::53" (port 53 when absent). */
export function parseServer(text: string): DnsServer {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  const v4WithPort = /^([^:]+):(\d+)$/.exec(text);
  const [host, port] = bracketed
    ? [bracketed[1]!, bracketed[2] ?? "53"]
    : v4WithPort
      ? [v4WithPort[1]!, v4WithPort[2]!]
      : [text, "53"];
  const n = Number(port);
  if (isIP(host) === 0 || !Number.isInteger(n) || n < 1 || n > 65_535)
    throw new Error(`${JSON.stringify(text)} is not a DNS server address (an IP, optionally with a port)`);
  return { host, port: n };
}

export function serverText(s: DnsServer): string {
  return isIP(s.host) === 6 ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`;
}

function queryPacket(type: dnsPacket.RecordType, name: string): dnsPacket.Packet {
  return {
    type: "query",
    id: randomInt(0, 65_536),
    flags: dnsPacket.RECURSION_DESIRED,
    questions: [{ type, name }],
    additionals: [{ type: "OPT", name: ".", udpPayloadSize: UDP_PAYLOAD } as dnsPacket.Answer],
  };
}

/** Whether a response answers this query: its id, the response bit, the same question. */
function answers(query: dnsPacket.Packet, response: dnsPacket.DecodedPacket): boolean {
  const q = query.questions![0]!;
  const r = response.questions?.[0];
  return (
    response.id === query.id &&
    response.type === "response" &&
    r !== undefined &&
    r.type === q.type &&
    r.name.toLowerCase() === q.name.toLowerCase()
  );
}

function decode(buf: Buffer): dnsPacket.DecodedPacket | undefined {
  try {
    return dnsPacket.decode(buf);
  } catch {
    return undefined;
  }
}

/** Asks one server one question: UDP first, TCP when the answer came back truncated. */
export async function exchange(
  server: DnsServer,
  type: dnsPacket.RecordType,
  name: string,
  timeoutMs: number,
): Promise<Exchange> {
  const query = queryPacket(type, name);
  const udp = await overUdp(server, query, timeoutMs);
  if (!udp.ok || !udp.response.flag_tc) return udp;
  return overTcp(server, query, timeoutMs);
}

function overUdp(server: DnsServer, query: dnsPacket.Packet, timeoutMs: number): Promise<Exchange> {
  const socket = createSocket(isIP(server.host) === 6 ? "udp6" : "udp4");
  let settled = false;
  return new Promise((done) => {
    const finish = (e: Exchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.close();
      done(e);
    };
    const timer = setTimeout(
      () => finish({ ok: false, detail: `no answer from ${serverText(server)} within ${timeoutMs} ms` }),
      timeoutMs,
    );
    // Connected: only the server's datagrams arrive, and a closed port shows as an error at once.
    socket.on("message", (msg) => {
      const response = decode(msg);
      if (response && answers(query, response)) finish({ ok: true, response });
      // Anything else (a late answer to an earlier try, garbage) is not this answer: wait on.
    });
    socket.on("error", (err) =>
      finish({ ok: false, detail: `${serverText(server)}: ${(err as NodeJS.ErrnoException).code ?? err.message}` }),
    );
    socket.connect(server.port, server.host, () => socket.send(dnsPacket.encode(query)));
  });
}

function overTcp(server: DnsServer, query: dnsPacket.Packet, timeoutMs: number): Promise<Exchange> {
  return new Promise((done) => {
    let buf = Buffer.alloc(0);
    let settled = false;
    const conn = connect(server.port, server.host, () => conn.write(new Uint8Array(dnsPacket.streamEncode(query))));
    const finish = (e: Exchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      conn.destroy();
      done(e);
    };
    const timer = setTimeout(
      () => finish({ ok: false, detail: `no answer over TCP from ${serverText(server)} within ${timeoutMs} ms` }),
      timeoutMs,
    );
    conn.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length < 2 || buf.length < 2 + buf.readUInt16BE(0)) return;
      const response = decode(buf.subarray(2, 2 + buf.readUInt16BE(0)));
      finish(
        response && answers(query, response)
          ? { ok: true, response }
          : { ok: false, detail: `a malformed answer over TCP from ${serverText(server)}` },
      );
    });
    conn.on("error", (err) =>
      finish({
        ok: false,
        detail: `${serverText(server)} over TCP: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
      }),
    );
    conn.on("close", () => finish({ ok: false, detail: `${serverText(server)} closed the TCP connection unanswered` }));
  });
}
