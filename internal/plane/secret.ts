// The plane secret: the credential of every call to limiterd on its cleartext (loopback) port,
// where no client certificate says who calls. limiterd makes it on its first start in DATA_DIR,
// mode 0600, so only the service's own user can read it; the processes and the admin CLI read
// it there and send it as a bearer token. Off loopback, mutual TLS is the credential instead.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { ensureSecretFile, readSecretFile } from "../secretfile/secretfile";
import type { ClientTls } from "./tls";

/** The secret's file under DATA_DIR. */
export const PLANE_SECRET_FILE = "plane.secret";

/** The metadata a call carries it in, as "Bearer <secret>". */
export const PLANE_SECRET_HEADER = "authorization";

const WHAT = "the plane secret";

/** The secret's text as kept: 32 random bytes, base64url. */
const SECRET_FORM = /^[A-Za-z0-9_-]{43}$/;

function checked(text: string, path: string): string {
  const secret = text.trim();
  if (!SECRET_FORM.test(secret))
    throw new Error(`${WHAT} ${path} is not one (43 base64url characters): remove it, and limiterd makes a new one`);
  return secret;
}

/** limiterd's side: the secret in dataDir, made (mode 0600) on the first start. */
export function ensurePlaneSecret(dataDir: string): string {
  const path = join(dataDir, PLANE_SECRET_FILE);
  return checked(ensureSecretFile(path, WHAT, () => `${randomBytes(32).toString("base64url")}\n`).text, path);
}

/** Whether a call's authorization metadata is the secret's bearer token (compared in constant time). */
export function bearerMatcher(secret: string): (authorization: string | null | undefined) => boolean {
  const want = Buffer.from(`Bearer ${secret}`);
  return (authorization) => {
    if (typeof authorization !== "string" || authorization.length !== want.length) return false;
    return timingSafeEqual(Buffer.from(authorization), want);
  };
}

/**
 * How a client proves itself to limiterd: its certificate on https:// (mutual TLS), or on
 * http:// the plane secret, read from its file at the first call that needs it (limiterd may
 * still be making it) and kept from then on.
 */
export type ClientCredential = { tls: ClientTls; secretFile?: undefined } | { tls?: undefined; secretFile: string };

/** The credential of a client whose DATA_DIR is dataDir: tls when given, else the plane secret there. */
export function clientCredential(tls: ClientTls | undefined, dataDir: string): ClientCredential {
  return tls ? { tls } : { secretFile: join(dataDir, PLANE_SECRET_FILE) };
}

/**
 * The metadata a client adds to each call: none on mutual TLS, the secret's bearer token
 * otherwise. Throws while the file is missing (the call fails; a later one reads it again).
 */
export function credentialHeaders(cred: ClientCredential): () => Record<string, string> {
  if (cred.tls) return () => ({});
  const path = cred.secretFile;
  let headers: Record<string, string> | undefined;
  return () => {
    if (headers) return headers;
    const text = readSecretFile(path, WHAT);
    if (text === undefined)
      throw new Error(`${WHAT} ${path} is not there yet: limiterd makes it at its first start, in its DATA_DIR`);
    headers = { [PLANE_SECRET_HEADER]: `Bearer ${checked(text, path)}` };
    return headers;
  };
}
