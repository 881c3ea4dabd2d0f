import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from "node:crypto";
import { join } from "node:path";
import { ensureSecretFile, readSecretFile, SecretFileError } from "../secretfile/secretfile";

// DKIM private keys at rest: sealed with AES-256-GCM under a master key that lives outside the
// records (DKIM_MASTER_KEY, or a file), so a copy of the records alone signs nothing. A sealed
// key names its master key by a fingerprint, which is how a changed master key is told apart
// from a damaged record. No message here ever holds key material, only fingerprints.

const MASTER_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const SEALED_VERSION = "dkimseal1";
const INSPECT = Symbol.for("nodejs.util.inspect.custom");

/** The file npm start keeps its master key in, under DATA_DIR. */
export const MASTER_KEY_FILE = "dkim-master.key";

export class MasterKeyError extends Error {}

/** What a key derived from the master key is for: the return path's HMAC, tracking links, plane tickets. */
export type DerivedKeyPurpose = "return-path" | "tracking" | "plane-ticket";

/** Each master key's bytes, out of reach of everything outside this module. */
const masterBytes = new WeakMap<MasterKey, Buffer>();

/** The key that seals every DKIM private key. Prints and serialises as its fingerprint only. */
export class MasterKey {
  /** A fingerprint (16 hex digits of an HMAC under the key): names the key, reveals nothing of it. */
  readonly id: string;

  private constructor(bytes: Buffer) {
    masterBytes.set(this, bytes);
    this.id = createHmac("sha256", bytes).update("mailcore DKIM master key").digest("hex").slice(0, 16);
  }

  /** A new random key. */
  static generate(): MasterKey {
    return new MasterKey(randomBytes(MASTER_KEY_BYTES));
  }

  /** The key from its base64 text; `source` names where the text came from, for the error. */
  static fromBase64(text: string, source: string): MasterKey {
    const trimmed = text.trim();
    const bytes = Buffer.from(trimmed, "base64");
    const canonical = /^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) && bytes.toString("base64") === trimmed;
    if (!canonical || bytes.length !== MASTER_KEY_BYTES)
      throw new MasterKeyError(
        `${source} must be the base64 of ${MASTER_KEY_BYTES} random bytes (make one with: openssl rand -base64 32)`,
      );
    return new MasterKey(bytes);
  }

  /**
   * A key of its own for one purpose, derived with HKDF-SHA256: the daemon keeps one secret, and
   * a key of one purpose reveals nothing of the others or of the master key.
   */
  derive(purpose: DerivedKeyPurpose): Buffer {
    return Buffer.from(hkdfSync("sha256", masterBytes.get(this)!, Buffer.alloc(0), `mailcore ${purpose} v1`, 32));
  }

  toString(): string {
    return `MasterKey(${this.id})`;
  }

  toJSON(): { id: string } {
    return { id: this.id };
  }

  [INSPECT](): string {
    return this.toString();
  }
}

const KEY_FILE = "the DKIM master key file";

/** A secret file's error as the master key's. */
function asMasterKeyError<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw err instanceof SecretFileError ? new MasterKeyError(err.message) : err;
  }
}

/** Reads a master key file (its base64 text); a file others may read is refused. */
export function readMasterKeyFile(path: string): MasterKey {
  const text = asMasterKeyError(() => readSecretFile(path, KEY_FILE));
  if (text === undefined) throw new MasterKeyError(`${KEY_FILE} ${path} does not exist`);
  return MasterKey.fromBase64(text, `${KEY_FILE} ${path}`);
}

/**
 * The master key in dir/dkim-master.key, made (mode 0600) when there is none: for npm start,
 * where nobody has set DKIM_MASTER_KEY. Two processes starting together agree on one key
 * (internal/secretfile).
 */
export function ensureMasterKeyFile(dir: string): { key: MasterKey; path: string; created: boolean } {
  const path = join(dir, MASTER_KEY_FILE);
  const { text, created } = asMasterKeyError(() =>
    ensureSecretFile(path, KEY_FILE, () => `${randomBytes(MASTER_KEY_BYTES).toString("base64")}\n`),
  );
  return { key: MasterKey.fromBase64(text, `${KEY_FILE} ${path}`), path, created };
}

export class SealedKeyError extends Error {
  constructor(
    /** wrong-master-key: sealed under another master key; corrupt: damaged or not a sealed key. */
    readonly reason: "wrong-master-key" | "corrupt",
    message: string,
  ) {
    super(message);
  }
}

/**
 * A private key sealed under the master key, as text for a record:
 * dkimseal1.<master key id>.<iv>.<ciphertext>.<tag> (base64url), the first two fields bound to
 * the ciphertext as associated data.
 */
export function sealPrivateKey(privateKey: KeyObject, master: MasterKey): string {
  const header = `${SEALED_VERSION}.${master.id}`;
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", masterBytes.get(master)!, iv).setAAD(Buffer.from(header));
  const der = privateKey.export({ format: "der", type: "pkcs8" });
  const sealed = Buffer.concat([cipher.update(der), cipher.final()]);
  der.fill(0);
  return [
    header,
    iv.toString("base64url"),
    sealed.toString("base64url"),
    cipher.getAuthTag().toString("base64url"),
  ].join(".");
}

/** Opens a sealed private key; a SealedKeyError says whether the master key is the wrong one or the text is damaged. */
export function openPrivateKey(sealed: string, master: MasterKey): KeyObject {
  const parts = sealed.split(".");
  const [version, keyId, iv, body, tag] = parts;
  const b64url = /^[A-Za-z0-9_-]+$/;
  if (
    parts.length !== 5 ||
    version !== SEALED_VERSION ||
    !/^[0-9a-f]{16}$/.test(keyId!) ||
    ![iv, body, tag].every((p) => b64url.test(p!))
  )
    throw new SealedKeyError("corrupt", `the sealed DKIM key is corrupt: it is not in the ${SEALED_VERSION} format`);
  if (keyId !== master.id)
    throw new SealedKeyError(
      "wrong-master-key",
      `the DKIM key was sealed under master key ${keyId}, and the master key given is ${master.id}: DKIM_MASTER_KEY (or its file) is not the one the keys were made with`,
    );
  let der: Buffer;
  try {
    const decipher = createDecipheriv("aes-256-gcm", masterBytes.get(master)!, Buffer.from(iv!, "base64url"), {
      authTagLength: TAG_BYTES,
    });
    decipher.setAAD(Buffer.from(`${version}.${keyId}`)).setAuthTag(Buffer.from(tag!, "base64url"));
    der = Buffer.concat([decipher.update(Buffer.from(body!, "base64url")), decipher.final()]);
  } catch {
    throw new SealedKeyError(
      "corrupt",
      `the sealed DKIM key is corrupt: it does not authenticate under master key ${master.id}, which it names`,
    );
  }
  try {
    return createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  } catch {
    throw new SealedKeyError("corrupt", "the sealed DKIM key is corrupt: it opens, but not to a private key");
  } finally {
    der.fill(0);
  }
}
