import type dnsPacket from "dns-packet";
import { getServers } from "node:dns";
import { domainToASCII } from "node:url";
import { type DnsServer, exchange, parseServer, serverText } from "./transport";

// The one way the project reads DNS: typed lookups whose answer says which of three things
// happened. `found`: records. `none`: the name does not exist (NXDOMAIN) or has no record of
// the type (NODATA), an answer a caller may act on. `temporary`: a timeout, a server failure, a
// broken answer, on which a caller must change nothing and try again later.
//
// Its own stub resolver over dns-packet rather than node:dns's Resolver: under Bun, Resolver's
// resolveTxt returns each character-string of a TXT record as a record of its own (a 2048-bit
// DKIM key, published as two strings, reads as two records), and it reports NODATA as
// ENOTFOUND, the same as a name that does not exist.

/** A TXT record: its character-strings as published, and joined (as SPF, DKIM and DMARC read it). */
export interface TxtRecord {
  strings: string[];
  text: string;
}

/** An MX record; exchange "." with preference 0 is a null MX (RFC 7505). */
export interface MxRecord {
  preference: number;
  exchange: string;
}

/** What a lookup of each type gives: addresses and names as text. */
export interface RecordData {
  TXT: TxtRecord;
  MX: MxRecord;
  A: string;
  AAAA: string;
  CNAME: string;
}
export type RecordType = keyof RecordData;

export type Answer<T> =
  | { kind: "found"; records: T[] }
  /** The name does not exist (nxdomain) or has no record of the type. */
  | { kind: "none"; nxdomain: boolean; detail: string }
  /** No answer to act on: a timeout, SERVFAIL, REFUSED, a broken or looping answer. */
  | { kind: "temporary"; detail: string };

/** Looks up the records of a type at a name, following CNAMEs (except for type CNAME itself). */
export type Resolve = <T extends RecordType>(type: T, name: string) => Promise<Answer<RecordData[T]>>;

export interface ResolverOptions {
  /** DNS_SERVER: an IP with an optional port; the system's resolvers when absent. */
  server?: string;
  /** How long one try waits for one server's answer. */
  timeoutMs?: number;
  /** How many times each server is tried before the lookup is a temporary failure. */
  tries?: number;
}

const NOERROR = 0;
const NXDOMAIN = 3;
const RCODES: Record<number, string> = { 1: "FORMERR", 2: "SERVFAIL", 4: "NOTIMP", 5: "REFUSED" };
/** The longest CNAME chain followed, as most resolvers (BIND's is 16; 8 is plenty for mail). */
const MAX_CHAIN = 8;

/**
 * A name as DNS asks for it: ASCII (an IDN becomes punycode), lower case, no trailing dot;
 * undefined when it is not a DNS name (an empty label, a label over 63 or a name over 253 bytes).
 */
export function dnsName(name: string): string | undefined {
  const trimmed = name.trim().replace(/\.$/, "");
  // domainToASCII turns an IDN into punycode; an all-ASCII name (underscores and all) stays as it is.
  const ascii = /^[\x21-\x7e]*$/.test(trimmed) ? trimmed.toLowerCase() : domainToASCII(trimmed);
  if (ascii === "" || ascii.length > 253) return undefined;
  const labels = ascii.split(".");
  if (labels.some((l) => l.length === 0 || l.length > 63 || !/^[a-z0-9_-]+$/.test(l))) return undefined;
  return ascii;
}

function systemServers(): DnsServer[] {
  const servers = getServers().map(parseServer);
  return servers.length > 0 ? servers : [{ host: "127.0.0.1", port: 53 }];
}

/** Lookups through opts.server, or the system's resolvers (read once, now). */
export function dnsResolver(opts: ResolverOptions = {}): Resolve {
  const servers = opts.server ? [parseServer(opts.server)] : systemServers();
  const timeoutMs = opts.timeoutMs ?? 1_500;
  const tries = opts.tries ?? 2;

  /** One question, each server tried `tries` times, until one gives NOERROR or NXDOMAIN. */
  const ask = async (
    type: RecordType,
    name: string,
  ): Promise<{ ok: true; response: dnsPacket.DecodedPacket } | { ok: false; detail: string }> => {
    let last = "";
    for (let attempt = 0; attempt < tries; attempt++) {
      for (const server of servers) {
        const ex = await exchange(server, type, name, timeoutMs);
        if (!ex.ok) {
          last = ex.detail;
          continue;
        }
        const rcode = (ex.response.flags ?? 0) & 0xf;
        if (rcode === NOERROR || rcode === NXDOMAIN) return ex;
        last = `${RCODES[rcode] ?? `rcode ${rcode}`} from ${serverText(server)}`;
      }
    }
    return { ok: false, detail: last };
  };

  return (async (type: RecordType, asked: string): Promise<Answer<unknown>> => {
    const name = dnsName(asked);
    if (name === undefined) throw new Error(`${JSON.stringify(asked)} is not a DNS name`);
    let current = name;
    for (let hop = 0; hop <= MAX_CHAIN; hop++) {
      const r = await ask(type, current);
      if (!r.ok) return { kind: "temporary", detail: `the DNS lookup of ${type} ${current} failed: ${r.detail}` };
      const answers = r.response.answers ?? [];
      const target = type === "CNAME" ? current : chainEnd(answers, current);
      if (target === undefined)
        return { kind: "temporary", detail: `the CNAMEs from ${current} loop or go on past ${MAX_CHAIN}` };
      const records = answers.filter((a) => a.type === type && sameName(a.name, target)).map((a) => recordOf(type, a));
      if (records.length > 0) return { kind: "found", records };
      if (((r.response.flags ?? 0) & 0xf) === NXDOMAIN)
        return { kind: "none", nxdomain: true, detail: `${target} does not exist (NXDOMAIN)` };
      // A CNAME whose target the server did not answer for (not its zone): ask for the target.
      if (target !== current) {
        current = target;
        continue;
      }
      return { kind: "none", nxdomain: false, detail: `${current} has no ${type} record` };
    }
    return { kind: "temporary", detail: `the CNAMEs from ${name} loop or go on past ${MAX_CHAIN}` };
  }) as Resolve;
}

function sameName(a: string, b: string): boolean {
  return a.replace(/\.$/, "").toLowerCase() === b;
}

/** Where the CNAMEs in an answer lead from name; undefined when they loop or run too long. */
function chainEnd(answers: dnsPacket.Answer[], name: string): string | undefined {
  let at = name;
  for (let hops = 0; hops <= MAX_CHAIN; hops++) {
    const cname = answers.find((a) => a.type === "CNAME" && sameName(a.name, at));
    if (!cname) return at;
    at = recordOf("CNAME", cname) as string;
  }
  return undefined;
}

function recordOf(type: RecordType, a: dnsPacket.Answer): unknown {
  const data = (a as { data: unknown }).data;
  switch (type) {
    case "TXT": {
      const strings = (Array.isArray(data) ? data : [data]).map((s: Buffer | string) => s.toString());
      return { strings, text: strings.join("") } satisfies TxtRecord;
    }
    case "MX": {
      const mx = data as { preference: number; exchange: string };
      const exchange = mx.exchange === "." || mx.exchange === "" ? "." : mx.exchange.replace(/\.$/, "").toLowerCase();
      return { preference: mx.preference, exchange } satisfies MxRecord;
    }
    case "CNAME":
      return (data as string).replace(/\.$/, "").toLowerCase();
    default:
      return data as string;
  }
}
