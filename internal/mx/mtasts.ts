import { request } from "node:https";
import { isIP, type LookupFunction } from "node:net";
import type { Resolve } from "../dnsquery/resolver";
import { isPrivateAddress } from "../netguard/netguard";

// MTA-STS (RFC 8461): a recipient domain says, through a TXT record at _mta-sts.<domain> and a
// policy file served over HTTPS at mta-sts.<domain>, that its mail must go over verified TLS to
// the MX hosts it lists. The policy is cached for its max_age and fetched again only when the
// TXT record's id changes; when a fetch fails, the cached policy goes on applying, and with
// none cached the domain has no policy (section 5). A policy once seen therefore cannot be
// removed by an attacker who blocks the fetch or the TXT lookup.

export type StsMode = "enforce" | "testing" | "none";

export interface MtaStsPolicy {
  mode: StsMode;
  /** Host names, or "*.example.net" for any name exactly one label below example.net. */
  mx: string[];
  /** Seconds the policy may be cached. */
  maxAge: number;
}

/** The longest max_age a policy may give (RFC 8461 3.2: about a year). */
const MAX_AGE_LIMIT = 31_557_600;
/** The largest policy file read (RFC 8461 3.3 suggests senders limit it; 64 KiB is its figure). */
const MAX_POLICY_BYTES = 64 * 1024;

/** The id of a domain's MTA-STS TXT record ("v=STSv1; id=..."), or why the text is not one. */
export function parseStsRecord(text: string): { ok: true; id: string } | { ok: false; reason: string } {
  const fields = text.split(";").map((f) => f.trim());
  if (fields[fields.length - 1] === "") fields.pop();
  const pairs = fields.map((f) => /^([A-Za-z0-9_.-]+)=([\x21-\x3a\x3c\x3e-\x7e]+)$/.exec(f));
  if (pairs.some((p) => p === null)) return { ok: false, reason: `"${text}" is not a list of key=value fields` };
  if (pairs[0]![1] !== "v" || pairs[0]![2] !== "STSv1")
    return { ok: false, reason: "the record does not start with v=STSv1" };
  const id = pairs.find((p) => p![1] === "id")?.[2];
  if (id === undefined) return { ok: false, reason: "the record has no id" };
  if (!/^[A-Za-z0-9]{1,32}$/.test(id)) return { ok: false, reason: `id=${id} is not 1 to 32 letters and digits` };
  return { ok: true, id };
}

/** A policy file (RFC 8461 3.2): "key: value" lines; or why a sender cannot use it. */
export function parseStsPolicy(text: string): { ok: true; policy: MtaStsPolicy } | { ok: false; reason: string } {
  const fields = new Map<string, string>();
  const mx: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "") continue;
    const m = /^([A-Za-z0-9_]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!m) return { ok: false, reason: `"${line.slice(0, 60)}" is not a key: value line` };
    if (m[1] === "mx") mx.push(m[2]!.toLowerCase());
    else if (!fields.has(m[1]!)) fields.set(m[1]!, m[2]!);
  }
  if (fields.get("version") !== "STSv1") return { ok: false, reason: "the policy's version is not STSv1" };
  const mode = fields.get("mode");
  if (mode !== "enforce" && mode !== "testing" && mode !== "none")
    return { ok: false, reason: `mode ${JSON.stringify(mode ?? "")} is not enforce, testing or none` };
  const maxAge = fields.get("max_age");
  if (maxAge === undefined || !/^\d{1,10}$/.test(maxAge) || Number(maxAge) > MAX_AGE_LIMIT)
    return {
      ok: false,
      reason: `max_age ${JSON.stringify(maxAge ?? "")} is not a number of seconds up to ${MAX_AGE_LIMIT}`,
    };
  if (mode !== "none" && mx.length === 0) return { ok: false, reason: `a policy in ${mode} mode lists no mx` };
  const bad = mx.find((p) => !/^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)+\.?$/.test(p));
  if (bad !== undefined) return { ok: false, reason: `mx ${JSON.stringify(bad)} is not a host name or *.domain` };
  return { ok: true, policy: { mode, mx, maxAge: Number(maxAge) } };
}

/** Whether a host name matches an mx pattern (RFC 8461 4.1: "*." stands for exactly one label). */
export function mxPatternMatches(pattern: string, host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  const p = pattern.toLowerCase().replace(/\.$/, "");
  if (!p.startsWith("*.")) return p === name;
  const dot = name.indexOf(".");
  return dot > 0 && name.slice(dot + 1) === p.slice(2);
}

/** What of a policy says where mail may go: its mode and mx patterns. */
export type StsRule = Pick<MtaStsPolicy, "mode" | "mx">;

/** Whether the policy lets mail go to mxHost: always under testing or none, only to a listed host under enforce. */
export function policyAllows(policy: StsRule, mxHost: string): boolean {
  return policy.mode !== "enforce" || policy.mx.some((p) => mxPatternMatches(p, mxHost));
}

/** Gets a domain's policy file; the body of a 200 text/plain answer, or why there is none. */
export type PolicyFetch = (domain: string) => Promise<{ ok: true; body: string } | { ok: false; reason: string }>;

export interface HttpsPolicyFetchOptions {
  /** How mta-sts.<domain> is resolved: the same DNS as the MX lookups. */
  resolve: Resolve;
  /** The CAs to trust instead of the system's (tests). */
  ca?: string | Buffer;
  /** The HTTPS port (443; tests give their server's). */
  port?: number;
  /** For the connection, the TLS handshake and the body together. */
  timeoutMs?: number;
  /** MX_ALLOW_PRIVATE: let mta-sts.<domain> be on a private or loopback address. */
  allowPrivate?: boolean;
}

/**
 * Fetches https://mta-sts.<domain>/.well-known/mta-sts.txt as RFC 8461 3.3 asks: the name
 * resolved through our DNS (and refused on a private address), the certificate verified for
 * that name, no redirect followed, only a 200 with text/plain, at most 64 KiB.
 */
export function httpsPolicyFetch(opts: HttpsPolicyFetchOptions): PolicyFetch {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return async (domain) => {
    const host = `mta-sts.${domain}`;
    const [a, aaaa] = await Promise.all([opts.resolve("A", host), opts.resolve("AAAA", host)]);
    const addresses = [...(a.kind === "found" ? a.records : []), ...(aaaa.kind === "found" ? aaaa.records : [])];
    if (addresses.length === 0) {
      const why = [a, aaaa].find((r) => r.kind === "temporary") ?? a;
      return { ok: false, reason: why.kind === "found" ? `${host} has no address` : why.detail };
    }
    const usable = opts.allowPrivate ? addresses : addresses.filter((ip) => !isPrivateAddress(ip));
    if (usable.length === 0) return { ok: false, reason: `${host} is on a private address (${addresses[0]})` };
    return getPolicy(host, usable[0]!, opts.port ?? 443, opts.ca, timeoutMs);
  };
}

function getPolicy(
  host: string,
  address: string,
  port: number,
  ca: string | Buffer | undefined,
  timeoutMs: number,
): ReturnType<PolicyFetch> {
  return new Promise((done) => {
    let settled = false;
    const finish = (r: Awaited<ReturnType<PolicyFetch>>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      done(r);
    };
    const family = isIP(address);
    const req = request(
      {
        hostname: host, // the name the certificate must be for, and the SNI and Host header
        port,
        path: "/.well-known/mta-sts.txt",
        method: "GET",
        ca,
        // The address is the one we resolved and checked, not the system resolver's.
        lookup: ((_name, o, cb) =>
          o?.all ? cb(null, [{ address, family }]) : cb(null, address, family)) as LookupFunction,
      },
      (res) => {
        const type = (res.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
        if (res.statusCode !== 200)
          return finish({
            ok: false,
            reason: `${host} answered HTTP ${res.statusCode} (a policy is a 200, redirects are not followed)`,
          });
        if (type !== "text/plain")
          return finish({ ok: false, reason: `${host} served the policy as ${type || "no type"}, not text/plain` });
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_POLICY_BYTES)
            return finish({ ok: false, reason: `${host}'s policy is over ${MAX_POLICY_BYTES} bytes` });
          chunks.push(chunk);
        });
        res.on("end", () => finish({ ok: true, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", (err) => finish({ ok: false, reason: `${host}: ${err.message}` }));
      },
    );
    const timer = setTimeout(
      () => finish({ ok: false, reason: `${host} did not serve its policy within ${timeoutMs} ms` }),
      timeoutMs,
    );
    req.on("error", (err) =>
      finish({ ok: false, reason: `${host}: ${(err as NodeJS.ErrnoException).code ?? ""} ${err.message}`.trim() }),
    );
    req.end();
  });
}

/** What a lookup found: the policy that applies (none: undefined) and how it was had. */
export interface StsLookup {
  policy: MtaStsPolicy | undefined;
  /** fetched: just now; cached: from an earlier fetch; none: the domain has no policy we can use. */
  source: "fetched" | "cached" | "none";
  /** Why there is no policy, or why a cached one was used (a failed fetch, a failed TXT lookup). */
  detail?: string;
}

export interface MtaStsCacheOptions {
  resolve: Resolve;
  fetch: PolicyFetch;
  /** Milliseconds now; Date.now unless a test moves its own. */
  nowMs?: () => number;
  /** How long a lookup's answer stands before the TXT record is asked again (a DNS query per message otherwise). */
  recheckMs?: number;
  /** How long a lookup that DNS did not answer stands (shorter: the answer may come soon). */
  retryMs?: number;
  /** The most domains kept; the least recently checked go first. */
  maxDomains?: number;
}

interface Entry {
  /** The policy and the TXT id it was fetched under, until expiresMs. */
  held?: { id: string; policy: MtaStsPolicy; expiresMs: number };
  /** Until when the last answer stands without a new TXT lookup. */
  freshUntilMs: number;
  last: StsLookup;
}

/** The MTA-STS policies of recipient domains, looked up and cached as RFC 8461 section 5 says. */
export class MtaStsCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<StsLookup>>();
  private readonly now: () => number;

  constructor(private readonly o: MtaStsCacheOptions) {
    this.now = o.nowMs ?? Date.now;
  }

  /** The policy that applies to mail for domain now. */
  lookup(domain: string): Promise<StsLookup> {
    const name = domain.toLowerCase().replace(/\.$/, "");
    const entry = this.entries.get(name);
    if (entry && this.now() < entry.freshUntilMs) return Promise.resolve(this.current(entry, entry.last));
    let pending = this.inflight.get(name);
    if (!pending) {
      pending = this.refresh(name, entry).finally(() => this.inflight.delete(name));
      this.inflight.set(name, pending);
    }
    return pending;
  }

  /** An entry's last answer, as far as its held policy has not expired since. */
  private current(entry: Entry, last: StsLookup): StsLookup {
    if (!last.policy || (entry.held && this.now() < entry.held.expiresMs)) return last;
    return { policy: undefined, source: "none", detail: "the cached policy expired" };
  }

  private async refresh(name: string, entry: Entry | undefined): Promise<StsLookup> {
    const now = this.now();
    const held = entry?.held && now < entry.held.expiresMs ? entry.held : undefined;
    const keep = (detail: string, retry: boolean): StsLookup => {
      const last: StsLookup = held
        ? { policy: held.policy, source: "cached", detail: `${detail}; the cached policy applies` }
        : { policy: undefined, source: "none", detail };
      this.store(name, {
        held,
        freshUntilMs: now + (retry ? (this.o.retryMs ?? 60_000) : (this.o.recheckMs ?? 600_000)),
        last,
      });
      return last;
    };

    const txt = await this.o.resolve("TXT", `_mta-sts.${name}`);
    if (txt.kind === "temporary") return keep(txt.detail, true);
    if (txt.kind === "none") return keep(`no MTA-STS record at _mta-sts.${name}`, false);
    // Records that do not start with v=STSv1 are not ours; more than one that does is no policy (RFC 8461 3.1).
    const records = txt.records.filter((r) => /^v=STSv1\s*(;|$)/.test(r.text));
    if (records.length !== 1)
      return keep(`${records.length === 0 ? "no" : records.length} MTA-STS records at _mta-sts.${name}`, false);
    const record = parseStsRecord(records[0]!.text);
    if (!record.ok) return keep(`the MTA-STS record at _mta-sts.${name}: ${record.reason}`, false);
    if (held && held.id === record.id) {
      const last: StsLookup = { policy: held.policy, source: "cached" };
      this.store(name, { held, freshUntilMs: now + (this.o.recheckMs ?? 600_000), last });
      return last;
    }
    const fetched = await this.o.fetch(name);
    if (!fetched.ok) return keep(`the policy of ${name} could not be fetched: ${fetched.reason}`, true);
    const parsed = parseStsPolicy(fetched.body);
    if (!parsed.ok) return keep(`the policy of ${name} is not usable: ${parsed.reason}`, false);
    const fresh = { id: record.id, policy: parsed.policy, expiresMs: now + parsed.policy.maxAge * 1000 };
    const last: StsLookup = { policy: parsed.policy, source: "fetched" };
    // A policy that expires before the next recheck is looked up again when it expires.
    const freshUntilMs = Math.min(now + (this.o.recheckMs ?? 600_000), fresh.expiresMs);
    this.store(name, { held: fresh, freshUntilMs, last });
    return last;
  }

  private store(name: string, entry: Entry): void {
    this.entries.delete(name); // re-inserted last: the Map's order is the order of checks
    this.entries.set(name, entry);
    const max = this.o.maxDomains ?? 10_000;
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= max) break;
      this.entries.delete(oldest);
    }
  }
}
