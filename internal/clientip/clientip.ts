import { isIP } from "node:net";

/** Strips the IPv4-mapped IPv6 prefix so 127.0.0.1 and ::ffff:127.0.0.1 are one client. */
export function normalizeIp(ip: string): string {
  return ip.startsWith("::ffff:") && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
}

/**
 * The IP a request is attributed to: the socket's peer, unless that peer is one of the
 * trusted proxies, in which case the right-most X-Forwarded-For entry that is not itself
 * a trusted proxy. A malformed entry stops the walk (the peer before it is the client).
 */
export function clientIp(peer: string, forwardedFor: string | null, trustedProxies: readonly string[]): string {
  let client = normalizeIp(peer);
  if (forwardedFor === null || !trustedProxies.includes(client)) return client;
  const hops = forwardedFor.split(",");
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i]!.trim());
    if (isIP(hop) === 0) break;
    client = hop;
    if (!trustedProxies.includes(hop)) break;
  }
  return client;
}
