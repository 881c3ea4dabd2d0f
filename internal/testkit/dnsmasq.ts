// Debian's dnsmasq as the test's own DNS server: authoritative for every name from a table the
// test gives, on a free UDP and TCP port of 127.0.0.1, with no upstream, no /etc/hosts, no cache
// and a TTL of 0 on every answer (so neither dnsmasq nor the resolver under test keeps an old
// answer when the test changes its records). A name the table does not have is NXDOMAIN; a name
// that has records of other types only answers NODATA. Names put under `timeout` are forwarded to
// a server that reads and never answers, so a lookup of them times out while the rest answer;
// names under `servfail` to one that answers SERVFAIL, which dnsmasq passes on.
import { type Subprocess, spawn } from "bun";
import dnsPacket from "dns-packet";
import { createSocket, type Socket } from "node:dgram";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { splitTxtValue } from "../dkim/keys";
import { tempDir } from "./testkit";

/** One DNS record of the table; several records may share a name (and a type). */
export type DnsRecord =
  /** One TXT record made of these character-strings (each at most 255 bytes, else dnsmasq splits it). */
  | { type: "TXT"; name: string; strings: string[] }
  /** exchange "." with preference 0 is a null MX (RFC 7505). */
  | { type: "MX"; name: string; preference: number; exchange: string }
  | { type: "A"; name: string; address: string }
  | { type: "AAAA"; name: string; address: string }
  /** The target may be a name of the table or not (then the answer is the CNAME alone). */
  | { type: "CNAME"; name: string; target: string }
  /** Every question about this name or a name under it is left unanswered. */
  | { type: "timeout"; name: string }
  /** Every question about this name or a name under it is answered SERVFAIL. */
  | { type: "servfail"; name: string };

/** A record as a sending domain shows it (the API's JSON, domainauth's list): its type, where, and what. */
export interface ShownRecord {
  type: string;
  name: string;
  value: string;
}

/** The table that publishes records as shown: an MX as its preference and host, a TXT value in the 255-byte strings DNS carries. */
export function tableOf(records: ShownRecord[]): DnsRecord[] {
  return records.map((r): DnsRecord => {
    if (r.type === "MX") {
      const [preference, exchange] = r.value.split(" ");
      return { type: "MX", name: r.name, preference: Number(preference), exchange: exchange! };
    }
    return { type: "TXT", name: r.name, strings: splitTxtValue(r.value) };
  });
}

/** A domain whose one MX host, mx.<domain>, is at address. */
export function oneMx(domain: string, address: string): DnsRecord[] {
  return [
    { type: "MX", name: domain, preference: 10, exchange: `mx.${domain}` },
    { type: "A", name: `mx.${domain}`, address },
  ];
}

export interface Dnsmasq {
  /** host:port, as DNS_SERVER takes it. */
  address: string;
  host: string;
  port: number;
  /** Replaces the whole table: restarts dnsmasq on the same port (its records are read at start only). */
  setRecords(records: DnsRecord[]): Promise<void>;
  stop(): Promise<void>;
}

/** A DNS server that reads every question and never answers (silent), or answers each with SERVFAIL. */
export interface BrokenDnsServer {
  address: string;
  port: number;
  /** How many UDP questions it has had. */
  questions(): number;
  stop(): Promise<void>;
}

const HOST = "127.0.0.1";
// Debian puts it under /usr/sbin, which is not on every user's PATH.
const DNSMASQ = existsSync("/usr/sbin/dnsmasq") ? "/usr/sbin/dnsmasq" : "dnsmasq";

/** A dnsmasq config string: quoted, with dnsmasq's escapes for the quote and the backslash. */
function quoted(s: string): string {
  return `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

function checkName(name: string): string {
  if (!/^[A-Za-z0-9_.*-]+$/.test(name) || name.startsWith(".") || name.includes(".."))
    throw new Error(`dnsmasq table: ${JSON.stringify(name)} is not a DNS name this helper writes`);
  return name.replace(/\.$/, "");
}

/** Where the timeout and servfail names are forwarded. */
export interface BrokenPorts {
  silent?: number;
  servfail?: number;
}

/** The dnsmasq config lines for a table. */
export function dnsmasqConfig(records: DnsRecord[], broken: BrokenPorts = {}): string[] {
  const lines = [
    "local=/#/", // authoritative for everything: unknown names are NXDOMAIN, never forwarded
    "local-ttl=0",
    "cache-size=0",
  ];
  for (const r of records) {
    const name = checkName(r.name);
    switch (r.type) {
      case "TXT":
        if (r.strings.length === 0) throw new Error(`dnsmasq table: the TXT record at ${name} has no string`);
        lines.push(`txt-record=${name},${r.strings.map(quoted).join(",")}`);
        break;
      case "MX":
        lines.push(`mx-host=${name},${r.exchange === "." ? "." : checkName(r.exchange)},${r.preference}`);
        break;
      case "A":
      case "AAAA":
        lines.push(`host-record=${name},${r.address}`);
        break;
      case "CNAME":
        lines.push(`cname=${name},${checkName(r.target)}`);
        break;
      case "timeout":
      case "servfail": {
        const port = r.type === "timeout" ? broken.silent : broken.servfail;
        if (port === undefined) throw new Error(`dnsmasq table: a ${r.type} name needs its broken server`);
        lines.push(`server=/${name}/${HOST}#${port}`);
        break;
      }
    }
  }
  return lines;
}

/** Whether a port is free for both UDP and TCP on 127.0.0.1 right now. */
async function freeBothWays(port: number): Promise<boolean> {
  const tcp = createServer();
  const udp = createSocket("udp4");
  const tcpOk = await new Promise<boolean>((done) => {
    tcp.once("error", () => done(false));
    tcp.listen(port, HOST, () => done(true));
  });
  const udpOk = await new Promise<boolean>((done) => {
    udp.once("error", () => done(false));
    udp.bind(port, HOST, () => done(true));
  });
  await Promise.all([
    new Promise<void>((done) => (tcpOk ? tcp.close(() => done()) : done())),
    new Promise<void>((done) => (udpOk ? udp.close(() => done()) : done())),
  ]);
  return tcpOk && udpOk;
}

async function freeUdpTcpPort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((done, fail) => {
      const srv = createServer();
      srv.on("error", fail);
      srv.listen(0, HOST, () => {
        const { port } = srv.address() as { port: number };
        srv.close(() => done(port));
      });
    });
    if (await freeBothWays(port)) return port;
  }
  throw new Error("no port free for both UDP and TCP on 127.0.0.1");
}

/** Whether something answers a DNS question on the port (any answer, even NXDOMAIN). */
function answers(port: number, timeoutMs = 200): Promise<boolean> {
  const socket = createSocket("udp4");
  return new Promise((done) => {
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      socket.close();
      done(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on("message", () => finish(true));
    socket.on("error", () => finish(false));
    const query = dnsPacket.encode({ type: "query", id: 1, questions: [{ type: "A", name: "ready.invalid" }] });
    socket.send(query, port, HOST);
  });
}

/** Starts a server that drops every DNS question it gets, over UDP and TCP, on one free port. */
export function startSilentDnsServer(): Promise<BrokenDnsServer> {
  return startBrokenDnsServer(undefined);
}

/** Starts a server that answers every DNS question over UDP with SERVFAIL (and holds TCP connections). */
export function startServfailDnsServer(): Promise<BrokenDnsServer> {
  return startBrokenDnsServer((q) => {
    // The question echoed (a forwarder matches the answer to it), the flags made a SERVFAIL answer.
    const reply = Buffer.from(q);
    reply[2] = reply[2]! | 0x80; // QR: a response
    reply[3] = (reply[3]! & 0xf0) | 2; // RCODE 2: SERVFAIL
    return reply;
  });
}

async function startBrokenDnsServer(answer: ((question: Buffer) => Buffer) | undefined): Promise<BrokenDnsServer> {
  const port = await freeUdpTcpPort();
  const udp: Socket = createSocket("udp4");
  let questions = 0;
  udp.on("message", (msg, peer) => {
    questions++;
    if (answer && msg.length >= 12) udp.send(answer(msg), peer.port, peer.address);
  });
  await new Promise<void>((done) => udp.bind(port, HOST, done));
  const held = new Set<import("node:net").Socket>();
  const tcp: Server = createServer((conn) => {
    held.add(conn);
    conn.on("data", () => {}); // read, never write
    conn.on("close", () => held.delete(conn));
    conn.on("error", () => {});
  });
  await new Promise<void>((done) => tcp.listen(port, HOST, done));
  return {
    address: `${HOST}:${port}`,
    port,
    questions: () => questions,
    async stop() {
      for (const c of held) c.destroy();
      await Promise.all([
        new Promise<void>((done) => udp.close(() => done())),
        new Promise<void>((done) => tcp.close(() => done())),
      ]);
    },
  };
}

/** Starts dnsmasq on a free port of 127.0.0.1 with the table. */
export async function startDnsmasq(records: DnsRecord[]): Promise<Dnsmasq> {
  const dir = tempDir("mailcore-dnsmasq-");
  let silent: BrokenDnsServer | undefined;
  let servfail: BrokenDnsServer | undefined;
  let proc: Subprocess | undefined;
  let stderr = "";

  const launch = async (port: number, table: DnsRecord[]): Promise<boolean> => {
    if (!silent && table.some((r) => r.type === "timeout")) silent = await startSilentDnsServer();
    if (!servfail && table.some((r) => r.type === "servfail")) servfail = await startServfailDnsServer();
    const conf = join(dir, "dnsmasq.conf");
    writeFileSync(conf, `${dnsmasqConfig(table, { silent: silent?.port, servfail: servfail?.port }).join("\n")}\n`);
    const args = [
      DNSMASQ,
      "--keep-in-foreground",
      `--port=${port}`,
      `--listen-address=${HOST}`,
      "--bind-interfaces",
      "--no-resolv",
      "--no-hosts",
      `--conf-file=${conf}`,
      `--pid-file=${join(dir, "dnsmasq.pid")}`,
      "--log-facility=-",
    ];
    // As root, dnsmasq would drop to nobody, who may not read the config in a private temp dir.
    if (process.getuid?.() === 0) args.push("--user=root");
    const p = spawn(args, { stdout: "ignore", stderr: "pipe" });
    stderr = "";
    void (async () => {
      for await (const chunk of p.stderr as ReadableStream<Uint8Array>) stderr += new TextDecoder().decode(chunk);
    })();
    // Ready when it answers; a dnsmasq that exits first (a port taken, a bad table) is not.
    const deadline = Date.now() + 10_000;
    let exited = false;
    const ready = await Promise.race([
      p.exited.then(() => {
        exited = true;
        return false;
      }),
      (async () => {
        while (!exited && Date.now() < deadline) {
          if (await answers(port)) return true;
          await Bun.sleep(20);
        }
        return false;
      })(),
    ]);
    if (!ready) {
      p.kill("SIGKILL");
      await p.exited;
      return false;
    }
    proc = p;
    return true;
  };

  let port = 0;
  for (let attempt = 0; attempt < 5 && !proc; attempt++) {
    port = await freeUdpTcpPort();
    // Another process may take the port between the check and dnsmasq's bind: then a new port.
    if (!(await launch(port, records)) && !/in use/i.test(stderr)) break;
  }
  if (!proc) {
    await Promise.all([silent?.stop(), servfail?.stop()]);
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`dnsmasq did not start: ${stderr.trim()}`);
  }

  const halt = async () => {
    if (!proc) return;
    proc.kill("SIGTERM");
    await proc.exited;
    proc = undefined;
  };

  return {
    address: `${HOST}:${port}`,
    host: HOST,
    port,
    async setRecords(table) {
      // Checked before the running server goes away, so a bad table leaves the old one serving.
      dnsmasqConfig(table, { silent: 0, servfail: 0 });
      await halt();
      if (!(await launch(port, table))) throw new Error(`dnsmasq did not start again on ${port}: ${stderr.trim()}`);
    },
    async stop() {
      await halt();
      await Promise.all([silent?.stop(), servfail?.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
