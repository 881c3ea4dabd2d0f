// A DNS server of the test's own on a free UDP port of 127.0.0.1: answers TXT, A and AAAA
// questions from a table the test fills, NXDOMAIN for names it does not have (NODATA for a type
// a name it has does not). Answers carry a TTL of 0: the resolver caches by TTL, and the test
// changes its records between lookups. An A or AAAA entry may be a sequence whose questions take
// the next answer each, round and round: a name that answers a public address and then 127.0.0.1.
// dns-packet (the codec behind multicast-dns and the like) reads and writes the messages;
// node:dgram carries them.
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
  /**
   * Publishes (or replaces) the addresses of a name: each question of the type gets the next
   * answer of the sequence (its records), round and round.
   */
  setAddresses(name: string, type: "A" | "AAAA", sequence: string[][]): void;
  /** How many questions it has answered; of one name and type when given. */
  questions(name?: string, type?: string): number;
  stop(): Promise<void>;
}

const NXDOMAIN = 3;

type Entry = { TXT?: (string | string[])[]; A?: { sequence: string[][]; next: number }; AAAA?: Entry["A"] };

export async function startDnsServer(): Promise<DnsServer> {
  const names = new Map<string, Entry>();
  const socket = createSocket("udp4");
  const asked: { name: string; type: string }[] = [];

  /** The answers to a question of a name the table has; advances an address sequence. */
  function answers(entry: Entry, question: dnsPacket.Question): dnsPacket.Answer[] {
    const { type, name } = question;
    if (type === "TXT") return (entry.TXT ?? []).map((v) => ({ type: "TXT" as const, name, ttl: 0, data: v }));
    if (type !== "A" && type !== "AAAA") return [];
    const seq = entry[type];
    if (!seq || seq.sequence.length === 0) return [];
    const records = seq.sequence[seq.next % seq.sequence.length]!;
    seq.next++;
    return records.map((data) => ({ type, name, ttl: 0, data }));
  }

  socket.on("message", (msg, peer) => {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    const name = question?.name.toLowerCase().replace(/\.$/, "") ?? "";
    asked.push({ name, type: question?.type ?? "" });
    const entry = names.get(name);
    const reply = dnsPacket.encode({
      type: "response",
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | (entry ? 0 : NXDOMAIN),
      questions: query.questions,
      answers: entry && question ? answers(entry, question) : [],
    });
    socket.send(reply, peer.port, peer.address);
  });
  await new Promise<void>((done) => socket.bind(0, "127.0.0.1", done));
  const entryOf = (name: string) => {
    const key = name.toLowerCase();
    const entry = names.get(key) ?? {};
    names.set(key, entry);
    return entry;
  };
  return {
    address: `127.0.0.1:${socket.address().port}`,
    setTxt: (name, values) => {
      entryOf(name).TXT = values;
    },
    setAddresses: (name, type, sequence) => {
      entryOf(name)[type] = { sequence, next: 0 };
    },
    questions: (name, type) =>
      asked.filter((q) => (name === undefined || q.name === name) && (type === undefined || q.type === type)).length,
    stop: () => new Promise((done) => socket.close(() => done())),
  };
}
