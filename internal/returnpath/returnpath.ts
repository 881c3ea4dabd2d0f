import { createHmac, timingSafeEqual } from "node:crypto";

// The envelope sender (MAIL FROM) of a message: <message id>-<mac>@<subdomain>.<from domain>.
// At a subdomain of the From domain, so SPF is checked against the platform's hosts (the
// subdomain's record points at them) and aligns with From under relaxed DMARC; a local part
// that names the message, so a bounce that comes back days later is tied to it; and a
// truncated HMAC over the id and the domain, so a bounce to an address we never sent from is
// recognised as forged.
//
// Case: some MTAs lower-case local parts. Message ids are lower-case already (msg_ and hex
// digits) and the HMAC is written in lower-case base32, so every character of the address is
// lower-case: a lower-casing MTA changes nothing, and the parser lower-cases what it is given
// before checking, so an upper-casing one changes nothing either.

export const DEFAULT_RETURN_PATH_SUBDOMAIN = "bounces";

/** Bytes of HMAC-SHA256 kept: 80 bits, 16 base32 characters; a forger must guess them. */
const MAC_BYTES = 10;
const MAC_CHARS = 16;
/** RFC 5321 section 4.5.3.1.1. */
const MAX_LOCAL_PART = 64;
const MAX_DOMAIN = 253;
/** The shortest key taken: the daemon keeps a random 32-byte secret. */
export const MIN_KEY_BYTES = 16;

/** An id as the platform makes them: a lower-case prefix, "_", lower-case letters and digits. */
const MESSAGE_ID = /^[a-z][a-z0-9]*_[a-z0-9]+$/;
const LOCAL_PART = new RegExp(`^([a-z][a-z0-9]*_[a-z0-9]+)-([a-z2-7]{${MAC_CHARS}})$`);
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export type ParsedReturnPath =
  | { ok: true; messageId: string; domain: string }
  /** not-ours: not an address this module makes; forged: shaped like one, but its HMAC is wrong. */
  | { ok: false; code: "not-ours" | "forged"; reason: string };

/** The return path of a message sent from fromDomain. */
export function returnPathFor(
  messageId: string,
  fromDomain: string,
  key: Uint8Array,
  subdomain: string = DEFAULT_RETURN_PATH_SUBDOMAIN,
): string {
  checkKey(key);
  if (!MESSAGE_ID.test(messageId))
    throw new Error(`${JSON.stringify(messageId)} is not a message id (lower-case letters, digits and one "_")`);
  const domain = `${subdomain}.${fromDomain}`.toLowerCase().replace(/\.$/, "");
  if (!isReturnPathSubdomain(subdomain) || domain.length > MAX_DOMAIN || !isDomainName(domain))
    throw new Error(`${JSON.stringify(domain)} is not a domain name a return path can be at`);
  const local = `${messageId}-${mac(key, messageId, domain)}`;
  if (local.length > MAX_LOCAL_PART)
    throw new Error(`the message id ${messageId} is too long for a return path's local part (${MAX_LOCAL_PART})`);
  return `${local}@${domain}`;
}

/** The message a return path names, or why it names none; the HMAC is compared in constant time. */
export function parseReturnPath(address: string, key: Uint8Array): ParsedReturnPath {
  checkKey(key);
  const lower = address.trim().toLowerCase();
  const at = lower.lastIndexOf("@");
  if (at <= 0 || at === lower.length - 1)
    return { ok: false, code: "not-ours", reason: `${clip(address)} is not an address` };
  const domain = lower.slice(at + 1).replace(/\.$/, "");
  const m = LOCAL_PART.exec(lower.slice(0, at));
  if (!m) return { ok: false, code: "not-ours", reason: `${clip(address)} is not a return path of ours` };
  const [, messageId, given] = m as unknown as [string, string, string];
  const expected = mac(key, messageId, domain);
  if (!timingSafeEqual(Buffer.from(given), Buffer.from(expected)))
    return {
      ok: false,
      code: "forged",
      reason: `${clip(address)} does not carry our HMAC for its message and domain: forged, altered, or made under another key`,
    };
  return { ok: true, messageId, domain };
}

/** Whether RETURN_PATH_SUBDOMAIN's value can stand before a domain: one or more DNS labels. */
export function isReturnPathSubdomain(subdomain: string): boolean {
  return subdomain.length <= 63 && isDomainName(subdomain.toLowerCase());
}

const isDomainName = (name: string) => name.split(".").every((l) => LABEL.test(l));

function checkKey(key: Uint8Array): void {
  if (key.length < MIN_KEY_BYTES) throw new Error(`the return path key must be at least ${MIN_KEY_BYTES} bytes`);
}

/** The HMAC of the id and the domain, truncated, in lower-case base32. */
function mac(key: Uint8Array, messageId: string, domain: string): string {
  const digest = createHmac("sha256", key).update(`mailcore return path\0${messageId}\0${domain}`).digest();
  return base32(digest.subarray(0, MAC_BYTES));
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** RFC 4648 base32, lower-case, for a whole number of 5-byte groups (no padding). */
function base32(bytes: Uint8Array): string {
  let out = "";
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = ((value << 8) | byte) & 0xfff; // at most 4 bits left over, and 8 new
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

const clip = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}...` : s);
