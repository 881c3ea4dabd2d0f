import { createPublicKey, generateKeyPair, type KeyObject } from "node:crypto";

// A sending domain's DKIM keys: made here, published as a TXT record at
// <selector>._domainkey.<domain>, kept sealed (seal.ts), used by the signer (sign.ts).

/** rsa-sha256 (RFC 6376) is what every receiver verifies; ed25519-sha256 (RFC 8463) is signed beside it. */
export type DkimAlgorithm = "rsa-sha256" | "ed25519-sha256";

export interface DkimKeyPair {
  algorithm: DkimAlgorithm;
  /** Node's key object: it prints and serialises without its key material. */
  privateKey: KeyObject;
  /** The p= value of the record to publish. */
  publicKey: string;
}

/** RSA keys are 2048 bits: receivers accept 1024 to 4096, and 2048 still fits one TXT record of two strings. */
export const RSA_BITS = 2048;

/** A new key pair; an RSA key takes up to a few hundred milliseconds, made off the event loop. */
export async function generateDkimKey(algorithm: DkimAlgorithm): Promise<DkimKeyPair> {
  const privateKey = await new Promise<KeyObject>((done, fail) => {
    const made = (err: Error | null, _publicKey: KeyObject, key: KeyObject) => (err ? fail(err) : done(key));
    if (algorithm === "rsa-sha256") generateKeyPair("rsa", { modulusLength: RSA_BITS }, made);
    else generateKeyPair("ed25519", made);
  });
  return { algorithm, privateKey, publicKey: publicKeyOf(algorithm, privateKey) };
}

/** The key type a private key must have for an algorithm. */
export function keyTypeOf(algorithm: DkimAlgorithm): "rsa" | "ed25519" {
  return algorithm === "rsa-sha256" ? "rsa" : "ed25519";
}

/**
 * The p= value for a private key: the SubjectPublicKeyInfo for RSA (what receivers read), the
 * bare 32-byte key for Ed25519 (RFC 8463 section 4.2).
 */
export function publicKeyOf(algorithm: DkimAlgorithm, privateKey: KeyObject): string {
  if (privateKey.asymmetricKeyType !== keyTypeOf(algorithm))
    throw new Error(`a key of type ${privateKey.asymmetricKeyType} cannot sign ${algorithm}`);
  const spki = createPublicKey(privateKey).export({ format: "der", type: "spki" });
  return (algorithm === "rsa-sha256" ? spki : spki.subarray(spki.length - 32)).toString("base64");
}

/** Where the key's record is published. */
export function dkimRecordName(selector: string, domain: string): string {
  return `${selector}._domainkey.${domain}`;
}

/** The TXT value to publish, as one string (DNS hosts' forms take it whole). */
export function dkimRecordValue(algorithm: DkimAlgorithm, publicKey: string): string {
  return `v=DKIM1; k=${keyTypeOf(algorithm)}; p=${publicKey}`;
}

/** The longest string a TXT record holds; a longer value is several strings, joined by receivers. */
export const TXT_STRING_MAX = 255;

/** A TXT value split into the strings DNS carries (a zone file writes them as "..." "..."). */
export function splitTxtValue(value: string): string[] {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new Error("a DKIM record value is printable ASCII");
  const strings: string[] = [];
  for (let i = 0; i < value.length; i += TXT_STRING_MAX) strings.push(value.slice(i, i + TXT_STRING_MAX));
  return strings.length > 0 ? strings : [""];
}

/** The selectors of one rotation: one name for the RSA key, one for the Ed25519 key made with it. */
export interface Selectors {
  rsa: string;
  ed25519: string;
}

const LETTERS = "abcdefghijklmnopqrstuvwxyz";

/**
 * The selectors of a new key: "mc", the year and month (UTC), and the first letter that no
 * selector of the domain has used that month: mc202611a, then mc202611b on a rotation in the
 * same month, mc202612a in the next. The Ed25519 key of the same rotation is the same name
 * with "-ed" (mc202611a-ed). A rotation always gets a name never published before, so a
 * receiver's cached old record can never be taken for the new key's. At most 26 a month.
 */
export function nextSelectors(now: Date, taken: Iterable<string>): Selectors {
  const month = `mc${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, "0")}`;
  const used = new Set([...taken].map((s) => s.toLowerCase().replace(/-ed$/, "")));
  for (const letter of LETTERS) {
    const base = `${month}${letter}`;
    if (!used.has(base)) return { rsa: base, ed25519: `${base}-ed` };
  }
  throw new Error(`26 DKIM keys were already made for this domain in ${month.slice(2)}: rotate again next month`);
}
