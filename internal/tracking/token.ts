// The signed tokens of tracking URLs: /t/o/<token> (the open pixel) and /t/c/<token> (a link).
// A token carries what it names, so the redirect needs no lookup and works as long as the key:
// the message id, and for a link its index among the message's links, their number, and the URL
// itself. The signature (HMAC-SHA256 under a key of the platform's, cut to 128 bits) is what makes
// the redirect closed: a token whose URL or message was changed, or that was made up, does not
// verify, so /t/c/ only ever sends a browser to a link that was in a message we sent.
//
// Format: base64url(JSON payload) "." base64url(MAC). The payload is
// [1, "o", messageId] or [1, "c", messageId, link index, link count, url].
import { createHmac, timingSafeEqual } from "node:crypto";

export type TrackingKey = string | Uint8Array;

export type TrackingTarget =
  | { kind: "open"; messageId: string }
  | { kind: "click"; messageId: string; link: number; links: number; url: string };

/** The longest URL a click token carries; a longer link is left as written. */
export const MAX_TRACKED_URL = 2_048;
/** Longer tokens are refused before any work (a URL of MAX_TRACKED_URL and a message id fit). */
const MAX_TOKEN = 4_096;
const MAX_MESSAGE_ID = 256;
const MAC_BYTES = 16;
const VERSION = 1;
/** Keeps a MAC made for tracking from being valid anywhere else the key might be used. */
const CONTEXT = "mailcore tracking token\n";

function mac(payload: string, key: TrackingKey): Buffer {
  return createHmac("sha256", key)
    .update(CONTEXT + payload)
    .digest()
    .subarray(0, MAC_BYTES);
}

/** Whether a URL may be tracked (and later redirected to): http or https, and not too long. */
export function trackableUrl(url: string): boolean {
  if (url.length > MAX_TRACKED_URL) return false;
  try {
    const u = new URL(url);
    return (u.protocol === "http:" || u.protocol === "https:") && u.href.length <= MAX_TRACKED_URL;
  } catch {
    return false;
  }
}

/** A token for target, signed with key. */
export function signToken(target: TrackingTarget, key: TrackingKey): string {
  const fields =
    target.kind === "open"
      ? [VERSION, "o", target.messageId]
      : [VERSION, "c", target.messageId, target.link, target.links, target.url];
  const payload = Buffer.from(JSON.stringify(fields)).toString("base64url");
  return `${payload}.${mac(payload, key).toString("base64url")}`;
}

/**
 * What a token names, if one of keys signed it (the current key first, then those being retired)
 * and it is well formed; undefined for anything else.
 */
export function readToken(token: string, keys: readonly TrackingKey[]): TrackingTarget | undefined {
  if (token.length > MAX_TOKEN) return undefined;
  const m = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(token);
  if (!m) return undefined;
  const [, payload, signature] = m as unknown as [string, string, string];
  const given = Buffer.from(signature, "base64url");
  if (given.length !== MAC_BYTES || !keys.some((k) => timingSafeEqual(mac(payload, k), given))) return undefined;
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
  return targetOf(fields);
}

function targetOf(fields: unknown): TrackingTarget | undefined {
  if (!Array.isArray(fields) || fields[0] !== VERSION) return undefined;
  const [, kind, messageId, link, links, url] = fields as unknown[];
  if (typeof messageId !== "string" || messageId === "" || messageId.length > MAX_MESSAGE_ID) return undefined;
  if (kind === "o" && fields.length === 3) return { kind: "open", messageId };
  if (kind !== "c" || fields.length !== 6 || typeof url !== "string" || !trackableUrl(url)) return undefined;
  if (!Number.isSafeInteger(link) || !Number.isSafeInteger(links)) return undefined;
  if ((link as number) < 0 || (link as number) >= (links as number)) return undefined;
  return { kind: "click", messageId, link: link as number, links: links as number, url };
}

/** The open pixel's URL under publicUrl. */
export function openUrl(publicUrl: string, messageId: string, key: TrackingKey): string {
  return `${publicUrl.replace(/\/+$/, "")}/t/o/${signToken({ kind: "open", messageId }, key)}`;
}

/** A link's redirect URL under publicUrl. */
export function clickUrl(
  publicUrl: string,
  target: Omit<Extract<TrackingTarget, { kind: "click" }>, "kind">,
  key: TrackingKey,
): string {
  return `${publicUrl.replace(/\/+$/, "")}/t/c/${signToken({ kind: "click", ...target }, key)}`;
}
