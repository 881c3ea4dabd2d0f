import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import dnsPacket from "dns-packet";
import { createSocket } from "node:dgram";
import { connect } from "node:net";
import { type Dnsmasq, type DnsRecord, dnsmasqConfig, startDnsmasq, startSilentDnsServer } from "./dnsmasq";

interface Reply {
  rcode: string;
  answers: { type: string; name: string; ttl?: number; data: unknown }[];
}

const RCODES: Record<number, string> = { 0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED" };

function decode(buf: Buffer): Reply {
  const p = dnsPacket.decode(buf);
  const answers = (p.answers ?? []).map((a) => {
    const d = (a as { data: unknown }).data;
    const data = Array.isArray(d) ? d.map((b) => b.toString()) : d;
    return { type: a.type, name: a.name, ttl: (a as { ttl?: number }).ttl, data };
  });
  return { rcode: RCODES[(p.flags ?? 0) & 0xf] ?? "other", answers };
}

const question = (type: string, name: string) =>
  dnsPacket.encode({
    type: "query",
    id: 7,
    flags: dnsPacket.RECURSION_DESIRED,
    questions: [{ type: type as dnsPacket.RecordType, name }],
  });

/** One question over UDP, with dns-packet and a socket: not through the resolver under test elsewhere. */
function udp(port: number, type: string, name: string, timeoutMs = 2_000): Promise<Reply | "timeout"> {
  const socket = createSocket("udp4");
  return new Promise((done) => {
    const timer = setTimeout(() => {
      socket.close();
      done("timeout");
    }, timeoutMs);
    socket.on("message", (m) => {
      clearTimeout(timer);
      socket.close();
      done(decode(m));
    });
    socket.send(question(type, name), port, "127.0.0.1");
  });
}

function tcp(port: number, type: string, name: string): Promise<Reply> {
  return new Promise((done, fail) => {
    const conn = connect(port, "127.0.0.1", () =>
      conn.write(new Uint8Array(dnsPacket.streamEncode(dnsPacket.decode(question(type, name))))),
    );
    let buf = Buffer.alloc(0);
    conn.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        conn.end();
        done(decode(buf.subarray(2, 2 + buf.readUInt16BE(0))));
      }
    });
    conn.on("error", fail);
  });
}

const LONG = `p=${"A".repeat(300)}`;
const TABLE: DnsRecord[] = [
  { type: "TXT", name: "s1._domainkey.example.test", strings: ["v=DKIM1; k=rsa; ", "p=ABC"] },
  { type: "TXT", name: "s1._domainkey.example.test", strings: ["second record"] },
  { type: "TXT", name: "quote.example.test", strings: ['say "hi", \\ then', "x"] },
  { type: "TXT", name: "long.example.test", strings: [LONG] },
  { type: "MX", name: "example.test", preference: 10, exchange: "mx1.example.test" },
  { type: "MX", name: "example.test", preference: 20, exchange: "mx2.example.test" },
  { type: "MX", name: "null.example.test", preference: 0, exchange: "." },
  { type: "A", name: "mx1.example.test", address: "127.0.0.2" },
  { type: "A", name: "mx1.example.test", address: "127.0.0.3" },
  { type: "AAAA", name: "mx1.example.test", address: "::1" },
  { type: "CNAME", name: "alias.example.test", target: "mx1.example.test" },
  { type: "timeout", name: "slow.example.test" },
  { type: "servfail", name: "broken.example.test" },
];

describe("dnsmasq", () => {
  let dns: Dnsmasq;
  beforeAll(async () => {
    dns = await startDnsmasq(TABLE);
  });
  afterAll(async () => {
    await dns?.stop();
  });

  test("a TXT record keeps its strings apart, and two records at a name stay two", async () => {
    const r = (await udp(dns.port, "TXT", "s1._domainkey.example.test")) as Reply;
    expect(r.rcode).toBe("NOERROR");
    expect(r.answers.map((a) => a.data).sort()).toEqual([["second record"], ["v=DKIM1; k=rsa; ", "p=ABC"]]);
    expect(r.answers.every((a) => a.ttl === 0)).toBe(true);
  });

  test("quotes, commas and backslashes in a string arrive as written; a long string is split at 255", async () => {
    expect(((await udp(dns.port, "TXT", "quote.example.test")) as Reply).answers[0]!.data).toEqual([
      'say "hi", \\ then',
      "x",
    ]);
    const long = ((await udp(dns.port, "TXT", "long.example.test")) as Reply).answers[0]!.data as string[];
    expect(long.map((s) => s.length)).toEqual([255, LONG.length - 255]);
    expect(long.join("")).toBe(LONG);
  });

  test("MX with preference, a null MX, A, AAAA and CNAME", async () => {
    const mx = (await udp(dns.port, "MX", "example.test")) as Reply;
    expect(
      mx.answers
        .map((a) => a.data)
        .sort((a, b) => (a as { preference: number }).preference - (b as { preference: number }).preference),
    ).toEqual([
      { preference: 10, exchange: "mx1.example.test" },
      { preference: 20, exchange: "mx2.example.test" },
    ]);
    expect(((await udp(dns.port, "MX", "null.example.test")) as Reply).answers.map((a) => a.data)).toEqual([
      { preference: 0, exchange: "." },
    ]);
    expect(((await udp(dns.port, "A", "mx1.example.test")) as Reply).answers.map((a) => a.data).sort()).toEqual([
      "127.0.0.2",
      "127.0.0.3",
    ]);
    expect(((await udp(dns.port, "AAAA", "mx1.example.test")) as Reply).answers.map((a) => a.data)).toEqual(["::1"]);
    const alias = (await udp(dns.port, "A", "alias.example.test")) as Reply;
    expect(alias.answers.map((a) => [a.type, a.data])).toEqual([
      ["CNAME", "mx1.example.test"],
      ["A", "127.0.0.2"],
      ["A", "127.0.0.3"],
    ]);
  });

  test("an unknown name is NXDOMAIN, a known name without the type is NODATA", async () => {
    expect(await udp(dns.port, "TXT", "nowhere.example.test")).toEqual({ rcode: "NXDOMAIN", answers: [] });
    expect(await udp(dns.port, "A", "s1._domainkey.example.test")).toEqual({ rcode: "NOERROR", answers: [] });
    expect(await udp(dns.port, "TXT", "other.invalid")).toEqual({ rcode: "NXDOMAIN", answers: [] });
  });

  test("it answers over TCP too", async () => {
    expect((await tcp(dns.port, "TXT", "s1._domainkey.example.test")).answers).toHaveLength(2);
  });

  test("a timeout name is never answered while the others are", async () => {
    expect(await udp(dns.port, "TXT", "_dmarc.slow.example.test", 1_500)).toBe("timeout");
    expect(((await udp(dns.port, "MX", "example.test")) as Reply).answers).toHaveLength(2);
  });

  test("a servfail name is answered SERVFAIL", async () => {
    expect(await udp(dns.port, "MX", "broken.example.test")).toEqual({ rcode: "SERVFAIL", answers: [] });
  });

  test("setRecords replaces the table on the same port", async () => {
    const before = dns.address;
    await dns.setRecords([{ type: "TXT", name: "s1._domainkey.example.test", strings: ["changed"] }]);
    expect(dns.address).toBe(before);
    expect(((await udp(dns.port, "TXT", "s1._domainkey.example.test")) as Reply).answers.map((a) => a.data)).toEqual([
      ["changed"],
    ]);
    expect(await udp(dns.port, "A", "mx1.example.test")).toEqual({ rcode: "NXDOMAIN", answers: [] });
    await dns.setRecords(TABLE);
  });

  test("a bad table is refused before the running server stops", async () => {
    await expect(dns.setRecords([{ type: "TXT", name: "bad name", strings: ["x"] }])).rejects.toThrow(/not a DNS name/);
    expect(((await udp(dns.port, "MX", "example.test")) as Reply).answers).toHaveLength(2);
  });
});

test("the silent server reads and drops", async () => {
  const silent = await startSilentDnsServer();
  try {
    expect(await udp(silent.port, "A", "example.test", 300)).toBe("timeout");
    expect(silent.questions()).toBe(1);
  } finally {
    await silent.stop();
  }
});

test("the config lines", () => {
  expect(
    dnsmasqConfig(
      [
        { type: "TXT", name: "a.test.", strings: ['x"y', "z"] },
        { type: "MX", name: "a.test", preference: 0, exchange: "." },
        { type: "timeout", name: "slow.test" },
      ],
      { silent: 5300 },
    ).slice(3),
  ).toEqual(['txt-record=a.test,"x\\"y","z"', "mx-host=a.test,.,0", "server=/slow.test/127.0.0.1#5300"]);
});
