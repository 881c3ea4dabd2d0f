import { parseTagList } from "../dkim/record";

// The records a receiver reads besides DKIM's, parsed by their grammars: SPF (RFC 7208) and
// DMARC (RFC 7489). Each parser answers what a receiver would make of the text, or why it
// would make nothing of it.

/** Whether a TXT record is an SPF record: its text starts with the version "v=spf1" (RFC 7208 4.5). */
export function isSpfRecord(text: string): boolean {
  return /^v=spf1(?: |$)/i.test(text);
}

export type SpfQualifier = "+" | "-" | "~" | "?";
const MECHANISMS = ["all", "include", "a", "mx", "ptr", "ip4", "ip6", "exists"] as const;
export type SpfMechanismName = (typeof MECHANISMS)[number];

export interface SpfMechanism {
  qualifier: SpfQualifier;
  name: SpfMechanismName;
  /** What follows ":" or "/" (a domain, a network), as written. */
  value?: string;
}

export interface SpfRecord {
  /** In the order a receiver evaluates them. */
  mechanisms: SpfMechanism[];
  /** redirect=, exp= and any unknown modifier (receivers ignore those). */
  modifiers: Map<string, string>;
}

export type SpfResult = { ok: true; record: SpfRecord } | { ok: false; reason: string };

const MECHANISM = /^([+\-~?]?)([a-z0-9]+)(?:([:/])(.*))?$/i;
const MODIFIER = /^([a-z][a-z0-9_.-]*)=(.*)$/i;
/** The mechanisms that name a domain after ":", and must (include, exists) or may (a, mx, ptr). */
const NEEDS_DOMAIN = new Set(["include", "exists"]);

/** Parses an SPF record's terms (RFC 7208 section 4.6, 5, 6); a term a receiver cannot read is an error. */
export function parseSpf(text: string): SpfResult {
  if (!isSpfRecord(text)) return { ok: false, reason: "the record does not start with v=spf1" };
  const mechanisms: SpfMechanism[] = [];
  const modifiers = new Map<string, string>();
  for (const term of text.split(/ +/).slice(1)) {
    if (term === "") continue;
    const modifier = MODIFIER.exec(term);
    if (modifier && !MECHANISM.exec(term)?.[3]) {
      const name = modifier[1]!.toLowerCase();
      if ((name === "redirect" || name === "exp") && modifiers.has(name))
        return { ok: false, reason: `${name}= appears twice (receivers give a permanent error)` };
      modifiers.set(name, modifier[2]!);
      continue;
    }
    const m = MECHANISM.exec(term);
    const name = m?.[2]?.toLowerCase();
    if (!m || !MECHANISMS.includes(name as SpfMechanismName))
      return { ok: false, reason: `"${term}" is not an SPF mechanism (receivers give a permanent error)` };
    const value = m[4];
    if (NEEDS_DOMAIN.has(name!) && (m[3] !== ":" || !value))
      return { ok: false, reason: `${name} needs a domain: ${name}:<domain>` };
    if (name === "all" && m[3] !== undefined) return { ok: false, reason: `"${term}": all takes no value` };
    mechanisms.push({ qualifier: (m[1] || "+") as SpfQualifier, name: name as SpfMechanismName, value });
  }
  return { ok: true, record: { mechanisms, modifiers } };
}

const sameDomain = (a: string, b: string) => a.replace(/\.$/, "").toLowerCase() === b.replace(/\.$/, "").toLowerCase();

/**
 * Whether the record lets the hosts of `include` send: a "+include:<include>" a receiver reaches
 * before any "all", or, with no "all", "redirect=<include>". The reason when it does not.
 */
export function spfAuthorizes(record: SpfRecord, include: string): { ok: true } | { ok: false; reason: string } {
  const named = record.mechanisms.some((m) => m.name === "include" && sameDomain(m.value!, include));
  for (const m of record.mechanisms) {
    if (m.name === "include" && sameDomain(m.value!, include)) {
      if (m.qualifier === "+") return { ok: true };
      return {
        ok: false,
        reason: `include:${include} has the qualifier "${m.qualifier}": it must pass (no qualifier)`,
      };
    }
    if (m.name === "all" && named)
      return {
        ok: false,
        reason: `include:${include} must come before "${m.qualifier === "+" ? "" : m.qualifier}all": receivers stop there`,
      };
  }
  // redirect= is followed only when no mechanism matched, and "all" always matches (RFC 7208 6.1).
  const redirect = record.modifiers.get("redirect");
  const hasAll = record.mechanisms.some((m) => m.name === "all");
  if (redirect !== undefined && sameDomain(redirect, include) && !hasAll) return { ok: true };
  return { ok: false, reason: `the record has no include:${include}` };
}

/** Whether a TXT record is a DMARC record: its first tag is v=DMARC1 (RFC 7489 6.6.3). */
export function isDmarcRecord(text: string): boolean {
  return /^v\s*=\s*DMARC1\s*(?:;|$)/.test(text);
}

export type DmarcPolicy = "none" | "quarantine" | "reject";

export interface DmarcRecord {
  policy: DmarcPolicy;
  /** sp=: the policy for subdomains, when given. */
  subdomainPolicy?: DmarcPolicy;
  /** rua=: where aggregate reports go, as written. */
  rua?: string;
  tags: ReadonlyMap<string, string>;
}

export type DmarcResult = { ok: true; record: DmarcRecord } | { ok: false; reason: string };

const POLICIES: readonly string[] = ["none", "quarantine", "reject"];

/** Parses a DMARC record as a receiver does (RFC 7489 6.3, 6.6.3). */
export function parseDmarc(text: string): DmarcResult {
  if (!isDmarcRecord(text)) return { ok: false, reason: "the record does not start with v=DMARC1" };
  const tags = parseTagList(text);
  if (typeof tags === "string") return { ok: false, reason: tags };
  const p = tags.get("p");
  const sp = tags.get("sp");
  const rua = tags.get("rua");
  if (sp !== undefined && !POLICIES.includes(sp))
    return { ok: false, reason: `sp=${sp} is not none, quarantine or reject` };
  let policy: DmarcPolicy;
  if (p !== undefined && POLICIES.includes(p)) policy = p as DmarcPolicy;
  // A record without a valid p= but with reports asked for is read as p=none (RFC 7489 6.6.3).
  else if (rua !== undefined && /^mailto:/i.test(rua)) policy = "none";
  else
    return {
      ok: false,
      reason: p === undefined ? "the record has no p= tag" : `p=${p} is not none, quarantine or reject`,
    };
  return { ok: true, record: { policy, subdomainPolicy: sp as DmarcPolicy | undefined, rua, tags } };
}

/** The value of our ownership record ("mailcore-verify=<value>"), or undefined when the text is not one. */
export function verificationToken(text: string): string | undefined {
  const m = /^\s*mailcore-verify\s*=\s*(\S+)\s*$/.exec(text);
  return m?.[1];
}
