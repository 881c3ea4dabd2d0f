import { getDomain } from "tldts";
import { type DkimAlgorithm, dkimRecordName, dkimRecordValue } from "../dkim/keys";

// The DNS records a sending domain publishes so that receivers trust its mail, as the API and
// the console show them: what to publish, where, and whether it was found right.
//
// The return path is published as an MX and a TXT record at <RETURN_PATH_SUBDOMAIN>.<domain>
// (the way Amazon SES's custom MAIL FROM domain works), not as a CNAME to a name of ours: each
// of the two is checked on its own and says what is wrong with it, the domain's owner keeps
// the name (a CNAME would hand us every record type at it), and the TXT can list the
// customer's other senders of bounces if they have any.

export type Purpose = "verification" | "dkim" | "return-path" | "spf" | "dmarc";
export type RecordStatus = "pending" | "verified" | "failed";

export interface DomainRecord {
  purpose: Purpose;
  type: "TXT" | "MX";
  /** The fully qualified name to publish at (no trailing dot). */
  name: string;
  /** Exactly what to publish (for MX: "<preference> <host>"). */
  value: string;
  status: RecordStatus;
  /** Why it is pending or failed; for a verified record, a note when there is one (DMARC p=none). */
  reason?: string;
  /** Whether the domain's status waits on it: a pending DKIM key's record and the DMARC advice do not. */
  required: boolean;
}

/** A DKIM key of the domain whose record is to be published. */
export interface DkimKey {
  selector: string;
  algorithm: DkimAlgorithm;
  /** The p= value. */
  publicKey: string;
  /** active: it signs now; pending: a rotation's new key, waiting for its record to verify. */
  state: "active" | "pending";
}

/** A sending domain, as far as its records go. */
export interface SendingDomain {
  /** ASCII (an IDN as punycode), lower case. */
  name: string;
  /** The value of the ownership record. */
  verifyValue: string;
  keys: DkimKey[];
}

/** What the platform asks its customers' records to name. */
export interface Platform {
  /** RETURN_PATH_SUBDOMAIN: the label of the return path under each domain ("bounces"). */
  returnPathSubdomain: string;
  /** SPF_INCLUDE: the domain whose SPF record lists the platform's sending addresses. */
  spfInclude: string;
  /** The host that receives the bounces (the platform's inbound MX). */
  inboundHost: string;
  /** Where the advised DMARC record sends aggregate reports; dmarc-reports@<organizational domain> when absent. */
  dmarcReports?: string;
}

/** The preference of the return path's MX record: the only one at the name, so any value does. */
export const RETURN_PATH_MX_PREFERENCE = 10;

/**
 * The organizational domain (RFC 7489 3.2): the registered domain under the Public Suffix List,
 * its private section included (tldts); the name itself when the list knows none.
 */
export function organizationalDomain(domain: string): string {
  return getDomain(domain, { allowPrivateDomains: true }) ?? domain;
}

export function verificationRecordName(domain: string): string {
  return `_mailcore.${domain}`;
}

export function verificationRecordValue(verifyValue: string): string {
  return `mailcore-verify=${verifyValue}`;
}

export function returnPathDomain(domain: string, platform: Platform): string {
  return `${platform.returnPathSubdomain}.${domain}`;
}

/** The records to publish for a domain, every one pending (not yet checked). */
export function recordsToPublish(domain: SendingDomain, platform: Platform): DomainRecord[] {
  const org = organizationalDomain(domain.name);
  const returnPath = returnPathDomain(domain.name, platform);
  const pending = { status: "pending" } as const;
  return [
    {
      purpose: "verification",
      type: "TXT",
      name: verificationRecordName(domain.name),
      value: verificationRecordValue(domain.verifyValue),
      ...pending,
      required: true,
    },
    ...domain.keys.map(
      (k): DomainRecord => ({
        purpose: "dkim",
        type: "TXT",
        name: dkimRecordName(k.selector, domain.name),
        value: dkimRecordValue(k.algorithm, k.publicKey),
        ...pending,
        required: k.state === "active",
      }),
    ),
    {
      purpose: "return-path",
      type: "MX",
      name: returnPath,
      value: `${RETURN_PATH_MX_PREFERENCE} ${platform.inboundHost}`,
      ...pending,
      required: true,
    },
    {
      purpose: "spf",
      type: "TXT",
      name: returnPath,
      value: `v=spf1 include:${platform.spfInclude} -all`,
      ...pending,
      required: true,
    },
    {
      purpose: "dmarc",
      type: "TXT",
      name: `_dmarc.${org}`,
      value: `v=DMARC1; p=none; rua=mailto:${platform.dmarcReports ?? `dmarc-reports@${org}`}`,
      ...pending,
      required: false,
    },
  ];
}

/** What identifies a record between two checks. */
export function recordKey(r: Pick<DomainRecord, "purpose" | "type" | "name">): string {
  return `${r.purpose} ${r.type} ${r.name}`;
}
