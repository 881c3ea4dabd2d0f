import { createPublicKey } from "node:crypto";

// A DKIM key record (RFC 6376 section 3.6.1) read the way a receiver reads it: the TXT strings
// joined with nothing between them, the tag list parsed by its grammar (section 3.2), never
// compared as a string. "ok" means a receiver could verify an rsa-sha256 or ed25519-sha256
// signature of email with the record; anything else is refused with the reason a person fixing
// the DNS needs.

export interface DkimRecord {
  /** k=: "rsa" (the default) or "ed25519". */
  keyType: "rsa" | "ed25519";
  /** p=: the public key, base64 with its whitespace removed. */
  publicKey: string;
  /** The key's size in bits (an Ed25519 key is 256). */
  keyBits: number;
  /** t=y: the domain is testing DKIM, and receivers treat a failed signature as no signature. */
  testing: boolean;
  /** t=s: a signature's i= must be in d= itself, not in a subdomain of it. */
  strictSubdomains: boolean;
  /** Every tag as written, its value with the whitespace around it removed. */
  tags: ReadonlyMap<string, string>;
}

export type DkimRecordResult = { ok: true; record: DkimRecord } | { ok: false; reason: string };

/** Receivers refuse RSA keys shorter than this (RFC 8301 section 3.2). */
const MIN_RSA_BITS = 1024;

const WSP = /[ \t\r\n]+/g;
const TAG_NAME = /^[A-Za-z][A-Za-z0-9_]*$/;
const VALUE = /^[\x21-\x3a\x3c-\x7e]+(?:[ \t\r\n]+[\x21-\x3a\x3c-\x7e]+)*$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Parses a DKIM key record: its TXT strings as DNS returns them (a record split into several
 * strings is one record), or the text already joined.
 */
export function parseDkimRecord(txt: string | readonly string[]): DkimRecordResult {
  const text = typeof txt === "string" ? txt : txt.join("");
  const tags = parseTagList(text);
  if (typeof tags === "string") return { ok: false, reason: tags };
  const version = tags.get("v");
  if (version !== undefined && (version !== "DKIM1" || tags.keys().next().value !== "v"))
    return { ok: false, reason: `v=${version} must be v=DKIM1, as the record's first tag` };
  const keyType = tags.get("k") ?? "rsa";
  if (keyType !== "rsa" && keyType !== "ed25519")
    return { ok: false, reason: `k=${keyType} is not a key type receivers know (rsa or ed25519)` };
  const hashes = tags.get("h");
  if (hashes !== undefined && !hashes.split(":").some((h) => h.trim() === "sha256"))
    return { ok: false, reason: `h=${hashes} does not allow sha256, the only hash signatures use today` };
  const services = tags.get("s");
  if (services !== undefined && !services.split(":").some((s) => s.trim() === "*" || s.trim() === "email"))
    return { ok: false, reason: `s=${services} does not cover email` };
  const p = tags.get("p");
  if (p === undefined) return { ok: false, reason: "the record has no p= (public key) tag" };
  const publicKey = p.replace(WSP, "");
  if (publicKey === "") return { ok: false, reason: "p= is empty: the key is revoked" };
  if (!BASE64.test(publicKey)) {
    const quoted = publicKey.includes('"')
      ? " (it holds quote characters: the DNS host kept the quotes as part of the text; publish the value without them)"
      : "";
    return { ok: false, reason: `p= is not base64${quoted}` };
  }
  const keyBits = publicKeyBits(keyType, Buffer.from(publicKey, "base64"));
  if (typeof keyBits === "string") return { ok: false, reason: keyBits };
  const flags = (tags.get("t") ?? "").split(":").map((f) => f.trim());
  return {
    ok: true,
    record: {
      keyType,
      publicKey,
      keyBits,
      testing: flags.includes("y"),
      strictSubdomains: flags.includes("s"),
      tags,
    },
  };
}

/** A tag list (RFC 6376 section 3.2; DMARC records use it too) as a map in the order written, or why it is not one. */
export function parseTagList(text: string): Map<string, string> | string {
  const specs = text.split(";");
  // A trailing semicolon is allowed; an empty tag anywhere else is not.
  if (specs.length > 1 && specs[specs.length - 1]!.trim() === "") specs.pop();
  const tags = new Map<string, string>();
  for (const spec of specs) {
    const eq = spec.indexOf("=");
    if (eq < 0)
      return spec.trim() === "" ? "the record is empty or has an empty tag (;;)" : `"${clip(spec)}" is not a tag=value`;
    const name = spec.slice(0, eq).trim();
    const value = spec.slice(eq + 1).trim();
    if (!TAG_NAME.test(name)) return `"${clip(name)}" is not a tag name`;
    if (value !== "" && !VALUE.test(value)) return `the value of ${name}= holds characters a tag value cannot hold`;
    if (tags.has(name)) return `the tag ${name}= appears twice, which makes the whole record invalid`;
    tags.set(name, value);
  }
  return tags;
}

/** The key's size in bits, or why p= is not a key of its type. */
function publicKeyBits(keyType: "rsa" | "ed25519", der: Buffer): number | string {
  if (keyType === "ed25519") {
    // RFC 8463 section 4.2: p= is the bare 32-byte key, not a SubjectPublicKeyInfo.
    return der.length === 32 ? 256 : `p= is ${der.length} bytes; an Ed25519 key is 32 (truncated or not ed25519?)`;
  }
  // Most records hold a SubjectPublicKeyInfo; RFC 6376 also allows the bare RSAPublicKey.
  for (const type of ["spki", "pkcs1"] as const) {
    try {
      const key = createPublicKey({ key: der, format: "der", type });
      if (key.asymmetricKeyType !== "rsa") return `p= is a ${key.asymmetricKeyType} key, not an RSA key`;
      const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
      return bits >= MIN_RSA_BITS ? bits : `p= is an RSA key of ${bits} bits; receivers need at least ${MIN_RSA_BITS}`;
    } catch {}
  }
  return "p= is not an RSA public key (truncated?)";
}

const clip = (s: string) => {
  const t = s.trim();
  return t.length > 40 ? `${t.slice(0, 40)}...` : t;
};
