import { keyTypeOf } from "../dkim/keys";
import { parseDkimRecord, parseTagList } from "../dkim/record";
import type { Answer, MxRecord, Resolve, TxtRecord } from "../dnsquery/resolver";
import { isDmarcRecord, isSpfRecord, parseDmarc, parseSpf, spfAuthorizes, verificationToken } from "./parse";
import {
  type DkimKey,
  type DomainRecord,
  organizationalDomain,
  type Platform,
  recordKey,
  recordsToPublish,
  type SendingDomain,
} from "./records";

// A domain's records checked the way a receiver reads them: each looked up in DNS and parsed,
// never compared as a string. A judge turns one lookup into a finding; settle() turns a finding
// and the record's last status into its new status. A lookup that timed out or failed on the
// server's side changes nothing: the record keeps its last status and says why.

/** What one lookup showed about one record, before its last status is taken into account. */
export type Finding =
  | { kind: "verified"; note?: string }
  /** Published, but a receiver would not use it as we need. */
  | { kind: "failed"; reason: string }
  /** Not published (or not any more). */
  | { kind: "missing"; reason: string }
  /** No answer to judge by: a timeout, a server failure. */
  | { kind: "temporary"; reason: string };

/** The finding of a lookup that found nothing, or could not tell; undefined when records were found. */
function unfound(answer: Answer<unknown>, type: string, name: string): Finding | undefined {
  if (answer.kind === "temporary") return { kind: "temporary", reason: answer.detail };
  if (answer.kind === "none")
    return {
      kind: "missing",
      reason: `no ${type} record at ${name}${answer.nxdomain ? " (the name does not exist)" : ""}`,
    };
  return undefined;
}

/**
 * Whether a record would be one of its kind without its quote characters: a DNS host that kept
 * the quotes of a zone-file value ("v=spf1 ...") as text. Receivers read the quotes as text too.
 */
function quotedLike(records: readonly TxtRecord[], isKind: (text: string) => boolean): boolean {
  return records.some((r) => r.text.includes('"') && isKind(r.text.replaceAll('"', "")));
}

const quotedReason = (name: string) =>
  `the TXT record at ${name} holds quote characters: the DNS host kept the quotes as part of the text; publish the value without them`;

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;

/** The ownership record: one of the TXT records at the name holds mailcore-verify=<the domain's value>. */
export function judgeVerification(answer: Answer<TxtRecord>, name: string, verifyValue: string): Finding {
  const nothing = unfound(answer, "TXT", name);
  if (nothing || answer.kind !== "found") return nothing!;
  const tokens = answer.records.map((r) => verificationToken(r.text)).filter((t) => t !== undefined);
  if (tokens.includes(verifyValue)) return { kind: "verified" };
  if (tokens.length > 0)
    return {
      kind: "failed",
      reason: `the TXT record at ${name} holds mailcore-verify=${tokens[0]}, not this domain's value`,
    };
  if (quotedLike(answer.records, (t) => verificationToken(t) !== undefined))
    return { kind: "failed", reason: quotedReason(name) };
  return { kind: "missing", reason: `no mailcore-verify= record among the TXT records at ${name}` };
}

/** A DKIM key record: exactly one TXT record at the name, parsed, its p= this key, not in testing. */
export function judgeDkim(answer: Answer<TxtRecord>, name: string, key: DkimKey): Finding {
  const nothing = unfound(answer, "TXT", name);
  if (nothing || answer.kind !== "found") return nothing!;
  if (answer.records.length > 1)
    return {
      kind: "failed",
      reason: `${answer.records.length} TXT records at ${name}: receivers need exactly one key record there; remove the others`,
    };
  const parsed = parseDkimRecord(answer.records[0]!.strings);
  const cut = cutShort(answer.records[0]!.text, key.publicKey);
  if (cut) return { kind: "failed", reason: `the DKIM record at ${name}: ${cut}` };
  if (!parsed.ok && quotedLike(answer.records, (t) => parseDkimRecord(t).ok))
    return { kind: "failed", reason: quotedReason(name) };
  if (!parsed.ok) return { kind: "failed", reason: `the DKIM record at ${name}: ${parsed.reason}` };
  const { record } = parsed;
  const keyType = keyTypeOf(key.algorithm);
  if (record.keyType !== keyType)
    return { kind: "failed", reason: `the DKIM record at ${name} has k=${record.keyType}; this key is ${keyType}` };
  if (!Buffer.from(record.publicKey, "base64").equals(Buffer.from(key.publicKey, "base64")))
    return {
      kind: "failed",
      reason: `the DKIM record at ${name} holds another key than this selector's (its p= begins ${record.publicKey.slice(0, 12)}..., ours ${key.publicKey.slice(0, 12)}...): publish the value shown`,
    };
  if (record.testing)
    return {
      kind: "failed",
      reason: `the DKIM record at ${name} has t=y: receivers treat the domain as testing DKIM and its signatures as absent; publish the value shown, without t=y`,
    };
  return { kind: "verified" };
}

/** Why the record's p= is the start of the key and not all of it (a DNS host that cut the value), if it is. */
function cutShort(text: string, publicKey: string): string | undefined {
  const tags = parseTagList(text);
  const p = typeof tags === "string" ? undefined : tags.get("p")?.replace(/\s+/g, "");
  if (!p || p.length >= publicKey.length || !publicKey.startsWith(p)) return undefined;
  return `p= is cut short: it holds ${p.length} of the key's ${publicKey.length} characters (some DNS hosts cut a value at 255 characters: publish it as the two strings shown, or as one value if the host splits it)`;
}

const sameHost = (a: string, b: string) => a.replace(/\.$/, "").toLowerCase() === b.replace(/\.$/, "").toLowerCase();

/** The return path's MX: every MX record at the name points at the platform's inbound host. */
export function judgeReturnPath(answer: Answer<MxRecord>, name: string, inboundHost: string): Finding {
  const nothing = unfound(answer, "MX", name);
  if (nothing || answer.kind !== "found") return nothing!;
  if (answer.records.some((r) => r.exchange === "."))
    return {
      kind: "failed",
      reason: `${name} has a null MX ("0 ."), which says it takes no mail: bounces could not come back`,
    };
  const others = [...new Set(answer.records.filter((r) => !sameHost(r.exchange, inboundHost)).map((r) => r.exchange))];
  if (others.length === answer.records.length)
    return { kind: "failed", reason: `the MX of ${name} points at ${others.join(", ")}, not ${inboundHost}` };
  if (others.length > 0)
    return {
      kind: "failed",
      reason: `the MX records of ${name} also point at ${others.join(", ")}: bounces would go there too; keep only ${inboundHost}`,
    };
  return { kind: "verified" };
}

/** The return path's SPF: one SPF record at the name, readable, that lets the platform's hosts send. */
export function judgeSpf(answer: Answer<TxtRecord>, name: string, include: string): Finding {
  const nothing = unfound(answer, "TXT", name);
  if (nothing || answer.kind !== "found") return nothing!;
  const spf = answer.records.filter((r) => isSpfRecord(r.text));
  if (spf.length === 0 && quotedLike(answer.records, isSpfRecord))
    return { kind: "failed", reason: quotedReason(name) };
  if (spf.length === 0)
    return { kind: "missing", reason: `no SPF record (v=spf1 ...) among the TXT records at ${name}` };
  if (spf.length > 1)
    return {
      kind: "failed",
      reason: `${spf.length} SPF records at ${name}: receivers give a permanent error; merge them into one`,
    };
  const parsed = parseSpf(spf[0]!.text);
  if (!parsed.ok) return { kind: "failed", reason: `the SPF record at ${name}: ${parsed.reason}` };
  const allows = spfAuthorizes(parsed.record, include);
  if (!allows.ok) return { kind: "failed", reason: `the SPF record at ${name}: ${allows.reason}` };
  return { kind: "verified" };
}

/** A DMARC record: one at the name, readable; any policy verifies, p=none with a note. */
export function judgeDmarc(answer: Answer<TxtRecord>, name: string): Finding {
  const nothing = unfound(answer, "TXT", name);
  if (nothing || answer.kind !== "found") return nothing!;
  const dmarc = answer.records.filter((r) => isDmarcRecord(r.text));
  if (dmarc.length === 0 && quotedLike(answer.records, isDmarcRecord))
    return { kind: "failed", reason: quotedReason(name) };
  if (dmarc.length === 0)
    return { kind: "missing", reason: `no DMARC record (v=DMARC1 ...) among the TXT records at ${name}` };
  if (dmarc.length > 1)
    return {
      kind: "failed",
      reason: `${plural(dmarc.length, "DMARC record")} at ${name}: receivers apply none of them; keep one`,
    };
  const parsed = parseDmarc(dmarc[0]!.text);
  if (!parsed.ok) return { kind: "failed", reason: `the DMARC record at ${name}: ${parsed.reason}` };
  if (parsed.record.policy === "none")
    return {
      kind: "verified",
      note: `p=none at ${name}: receivers report mail that fails DMARC but still deliver it; move to p=quarantine or p=reject once the reports show only your own mail`,
    };
  return { kind: "verified" };
}

/**
 * A record's new status from a finding and its last check (same name and value). Absence after
 * a record was once seen (verified or failed) is a failure; before, it is pending. A temporary
 * finding keeps the last status.
 */
export function settle(record: DomainRecord, finding: Finding, previous: DomainRecord | undefined): DomainRecord {
  const { reason: _, ...base } = record;
  switch (finding.kind) {
    case "verified":
      return finding.note ? { ...base, status: "verified", reason: finding.note } : { ...base, status: "verified" };
    case "failed":
      return { ...base, status: "failed", reason: finding.reason };
    case "missing":
      return previous?.status === "verified"
        ? { ...base, status: "failed", reason: `${finding.reason}; it was verified before` }
        : { ...base, status: previous?.status === "failed" ? "failed" : "pending", reason: finding.reason };
    case "temporary":
      return {
        ...base,
        status: previous?.status ?? "pending",
        reason: `${finding.reason}; the status is kept from the last check until DNS answers`,
      };
  }
}

/** The DMARC record that applies to mail from the domain: its own, else the organizational domain's (RFC 7489 6.6.3). */
async function dmarcFinding(resolve: Resolve, domain: string, orgName: string): Promise<Finding> {
  const org = organizationalDomain(domain);
  if (org !== domain) {
    const own = `_dmarc.${domain}`;
    const finding = judgeDmarc(await resolve("TXT", own), own);
    if (finding.kind !== "missing") return finding;
  }
  return judgeDmarc(await resolve("TXT", orgName), orgName);
}

/**
 * Checks every record of the domain against DNS: the records of recordsToPublish, in the same
 * order, each with its status and reason. previous: the records of the last check.
 */
export async function checkDomain(
  resolve: Resolve,
  domain: SendingDomain,
  platform: Platform,
  previous: readonly DomainRecord[] = [],
): Promise<DomainRecord[]> {
  const records = recordsToPublish(domain, platform);
  const last = new Map(previous.map((r) => [recordKey(r), r]));
  const keys = new Map(domain.keys.map((k) => [k.selector, k]));
  const findings = await Promise.all(
    records.map(async (r): Promise<Finding> => {
      switch (r.purpose) {
        case "verification":
          return judgeVerification(await resolve("TXT", r.name), r.name, domain.verifyValue);
        case "dkim": {
          const selector = r.name.slice(0, r.name.indexOf("._domainkey."));
          return judgeDkim(await resolve("TXT", r.name), r.name, keys.get(selector)!);
        }
        case "return-path":
          return judgeReturnPath(await resolve("MX", r.name), r.name, platform.inboundHost);
        case "spf":
          return judgeSpf(await resolve("TXT", r.name), r.name, platform.spfInclude);
        case "dmarc":
          return dmarcFinding(resolve, domain.name, r.name);
      }
    }),
  );
  return records.map((r, i) => {
    const before = last.get(recordKey(r));
    // A status found for another value (a new SPF include, say) says nothing about this one.
    return settle(r, findings[i]!, before?.value === r.value ? before : undefined);
  });
}
