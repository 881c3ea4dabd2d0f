// A DNS server of the test's own on a free UDP port of 127.0.0.1: answers TXT questions from a
// table the test fills, NXDOMAIN for names it does not have. Answers carry a TTL of 0: the
// resolver caches by TTL, and the test changes its records between lookups. dns-packet (the codec behind
// multicast-dns and the like) reads and writes the messages; node:dgram carries them.
import dnsPacket from "dns-packet";
import { createSocket } from "node:dgram";

export interface DnsServer {
  /** host:port, as DNS_SERVER takes it. */
  address: string;
  /**
   * Publishes (or replaces) the TXT records of a name: one record per value, a record given as
   * a list being several strings (as a value longer than 255 bytes must be).
   */
  setTxt(name: string, values: (string | string[])[]): void;
  /** How many questions it has answered. */
  questions(): number;
  stop(): Promise<void>;
}

const NXDOMAIN = 3;

export async function startDnsServer(): Promise<DnsServer> {
  const txt = new Map<string, (string | string[])[]>();
  const socket = createSocket("udp4");
  let asked = 0;
  socket.on("message", (msg, peer) => {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return;
    }
    asked++;
    const question = query.questions?.[0];
    const name = question?.name.toLowerCase().replace(/\.$/, "") ?? "";
    const values = txt.get(name);
    const reply = dnsPacket.encode({
      type: "response",
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | (values ? 0 : NXDOMAIN),
      questions: query.questions,
      answers:
        values && question?.type === "TXT"
          ? values.map((v) => ({ type: "TXT" as const, name: question.name, ttl: 0, data: v }))
          : [],
    });
    socket.send(reply, peer.port, peer.address);
  });
  await new Promise<void>((done) => socket.bind(0, "127.0.0.1", done));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    setTxt: (name, values) => txt.set(name.toLowerCase(), values),
    questions: () => asked,
    stop: () => new Promise((done) => socket.close(() => done())),
  };
}
