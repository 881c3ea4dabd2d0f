import { createHmac, randomBytes } from "node:crypto";

// Standard Webhooks signing (https://www.standardwebhooks.com): the secret is "whsec_" and
// base64 key bytes; the signature is "v1," and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}".

const SECRET_PREFIX = "whsec_";

/** A new endpoint secret: 24 random bytes. */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(24).toString("base64")}`;
}

/** The webhook-signature header of one attempt. */
export function signWebhook(secret: string, id: string, timestampS: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampS}.${body}`).digest("base64")}`;
}
