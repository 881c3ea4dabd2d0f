import { createHash, randomBytes } from "node:crypto";

// API tokens: "mc_" and 43 base64url characters (32 random bytes). The daemon keeps only
// their SHA-256; a token is looked up by its hash and never stored, compared or logged.
const TOKEN_PATTERN = /^mc_[A-Za-z0-9_-]{43}$/;

export function newToken(): string {
  return `mc_${randomBytes(32).toString("base64url")}`;
}

export function isWellFormed(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
