import { dnsName, type Resolve } from "../dnsquery/resolver";
import { isPrivateAddress } from "../netguard/netguard";

// The route of a recipient domain's mail (RFC 5321 section 5.1): its MX hosts by preference,
// equal preferences in a random order so that the load spreads as the domain meant it to; the
// domain itself when it has no MX (the implicit MX); nowhere when it publishes a null MX
// (RFC 7505) or does not exist. Each host is resolved to its addresses, IPv4 first (a worker
// without an IPv6 route would otherwise lose a timeout on every host). Addresses in private,
// loopback, link-local and other non-public ranges are dropped unless allowed: a recipient
// domain must not be a way into the operator's network.

export interface RouteHost {
  /** The MX host's name (the domain itself for an implicit MX). */
  name: string;
  preference: number;
  /** Its addresses to try, in order. */
  addresses: string[];
}

export type RouteResult =
  /** Hosts most preferred first, each with at least one address. */
  | { kind: "route"; hosts: RouteHost[]; implicit: boolean }
  /**
   * The domain takes no mail from us, and will not on a retry; status says why as an enhanced
   * status code would (5.1.10 a null MX, 5.1.2 no such domain or no host with an address, 5.1.3
   * not a domain name, 5.7.0 hosts on addresses we do not connect to: our policy, not the
   * mailbox's fault).
   */
  | { kind: "permanent"; reason: string; status: string }
  /** DNS did not answer well enough to tell: try again later. */
  | { kind: "temporary"; reason: string };

export interface RouteOptions {
  /** MX_ALLOW_PRIVATE: let hosts on private and loopback addresses be used (tests, a closed network). */
  allowPrivate?: boolean;
  /** A number in [0, 1), for the order of equal preferences; Math.random unless a test gives one. */
  random?: () => number;
  /** The most MX hosts resolved (most preferred first), bounding the DNS work of one domain. */
  maxHosts?: number;
}

const DEFAULT_MAX_HOSTS = 10;

/**
 * The MX records ordered by preference, each run of equal preferences shuffled (Fisher-Yates).
 * Sorted by name first, so the order depends on the random source only, not on DNS's.
 */
export function orderByPreference<T extends { preference: number; exchange: string }>(
  records: readonly T[],
  random: () => number,
): T[] {
  const sorted = [...records].sort(
    (a, b) => a.preference - b.preference || (a.exchange < b.exchange ? -1 : a.exchange > b.exchange ? 1 : 0),
  );
  for (let start = 0; start < sorted.length; ) {
    let end = start;
    while (end < sorted.length && sorted[end]!.preference === sorted[start]!.preference) end++;
    for (let i = end - 1; i > start; i--) {
      const j = start + Math.floor(random() * (i - start + 1));
      [sorted[i], sorted[j]] = [sorted[j]!, sorted[i]!];
    }
    start = end;
  }
  return sorted;
}

type HostAddresses =
  | { kind: "found"; addresses: string[]; refused: string[] }
  | { kind: "none"; detail: string }
  | { kind: "temporary"; detail: string };

/** A host's addresses, IPv4 first, the refused ones apart. */
async function hostAddresses(resolve: Resolve, host: string, allowPrivate: boolean): Promise<HostAddresses> {
  if (dnsName(host) === undefined) return { kind: "none", detail: `${JSON.stringify(host)} is not a host name` };
  const [a, aaaa] = await Promise.all([resolve("A", host), resolve("AAAA", host)]);
  const all = [...(a.kind === "found" ? a.records : []), ...(aaaa.kind === "found" ? aaaa.records : [])];
  if (all.length === 0) {
    const temporary = [a, aaaa].find((r) => r.kind === "temporary");
    if (temporary && temporary.kind === "temporary") return { kind: "temporary", detail: temporary.detail };
    return { kind: "none", detail: `${host} has no address (no A or AAAA record)` };
  }
  const refused = allowPrivate ? [] : all.filter(isPrivateAddress);
  return { kind: "found", addresses: all.filter((ip) => !refused.includes(ip)), refused };
}

/** The route of a recipient domain's mail. */
export async function mxRoute(resolve: Resolve, domain: string, opts: RouteOptions = {}): Promise<RouteResult> {
  const name = dnsName(domain);
  if (name === undefined)
    return { kind: "permanent", reason: `${JSON.stringify(domain)} is not a domain name`, status: "5.1.3" };
  const mx = await resolve("MX", name);
  if (mx.kind === "temporary") return { kind: "temporary", reason: mx.detail };
  if (mx.kind === "none" && mx.nxdomain)
    return { kind: "permanent", reason: `${name} does not exist (NXDOMAIN)`, status: "5.1.2" };
  const implicit = mx.kind === "none";
  if (mx.kind === "found" && mx.records.some((r) => r.exchange === "."))
    return {
      kind: "permanent",
      reason: `${name} publishes a null MX ("0 ."): it accepts no mail (RFC 7505)`,
      status: "5.1.10",
    };
  const exchanges =
    mx.kind === "found"
      ? orderByPreference(mx.records, opts.random ?? Math.random).slice(0, opts.maxHosts ?? DEFAULT_MAX_HOSTS)
      : [{ preference: 0, exchange: name }];

  const resolved = await Promise.all(
    exchanges.map(async (r) => ({ ...r, found: await hostAddresses(resolve, r.exchange, opts.allowPrivate === true) })),
  );
  const hosts = resolved.flatMap((r) =>
    r.found.kind === "found" && r.found.addresses.length > 0
      ? [{ name: r.exchange, preference: r.preference, addresses: r.found.addresses }]
      : [],
  );
  if (hosts.length > 0) return { kind: "route", hosts, implicit };

  const temporary = resolved.find((r) => r.found.kind === "temporary");
  if (temporary && temporary.found.kind === "temporary") return { kind: "temporary", reason: temporary.found.detail };
  const refused = resolved.flatMap((r) =>
    r.found.kind === "found" ? r.found.refused.map((ip) => `${r.exchange} ${ip}`) : [],
  );
  if (refused.length > 0)
    return {
      kind: "permanent",
      reason: `the mail hosts of ${name} are on private or reserved addresses only (${refused.join(", ")}), which delivery does not connect to`,
      status: "5.7.0",
    };
  const what = implicit ? `${name} has no MX record and no address` : `no MX host of ${name} has an address`;
  const details = resolved.flatMap((r) => (r.found.kind === "none" ? [r.found.detail] : []));
  return { kind: "permanent", reason: `${what} (${details.join("; ")})`, status: "5.1.2" };
}

/** A route that could not be had; permanent when the domain cannot get mail at all. */
export class RouteError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    /** For a permanent one: why, as an enhanced status code (see RouteResult). */
    readonly status?: string,
  ) {
    super(message);
    this.name = "RouteError";
  }
}

/** mxRoute as a function that resolves to the hosts or rejects with a RouteError. */
export function routeLookup(
  resolve: Resolve,
  opts: RouteOptions = {},
): (domain: string) => Promise<{ hosts: RouteHost[] }> {
  return async (domain) => {
    const r = await mxRoute(resolve, domain, opts);
    if (r.kind === "route") return { hosts: r.hosts };
    throw new RouteError(r.reason, r.kind === "permanent", r.kind === "permanent" ? r.status : undefined);
  };
}

export interface RouteCacheOptions {
  /** How long a route, or a permanent refusal, is used without asking DNS again. */
  ttlMs?: number;
  /** The most domains kept; the oldest go first. */
  maxDomains?: number;
  nowMs?: () => number;
}

/**
 * A route lookup whose answers are kept a while (a minute by default: MX and address records
 * commonly live 5 minutes or more, and a minute bounds how long a changed record is missed),
 * so a campaign to one domain asks DNS once a minute rather than three times a message; lookups
 * of a domain under way are shared. A temporary failure is not kept: the next message asks again.
 */
export function cachedRouteLookup(
  lookup: (domain: string) => Promise<{ hosts: RouteHost[] }>,
  opts: RouteCacheOptions = {},
): (domain: string) => Promise<{ hosts: RouteHost[] }> {
  const ttlMs = opts.ttlMs ?? 60_000;
  const maxDomains = opts.maxDomains ?? 10_000;
  const now = opts.nowMs ?? Date.now;
  const kept = new Map<string, { untilMs: number; answer: Promise<{ hosts: RouteHost[] }> }>();
  return (domain) => {
    const key = domain.toLowerCase();
    const hit = kept.get(key);
    if (hit && now() < hit.untilMs) return hit.answer;
    kept.delete(key);
    const answer = lookup(domain);
    const entry = { untilMs: Number.POSITIVE_INFINITY, answer };
    kept.set(key, entry);
    if (kept.size > maxDomains) kept.delete(kept.keys().next().value!);
    answer.then(
      () => {
        entry.untilMs = now() + ttlMs;
      },
      (err: unknown) => {
        if (err instanceof RouteError && err.permanent) entry.untilMs = now() + ttlMs;
        else if (kept.get(key) === entry) kept.delete(key);
      },
    );
    return answer;
  };
}
