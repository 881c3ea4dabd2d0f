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

/** IPV6_PREFIX_BITS' default: a /64, the network one IPv6 host or customer line is usually given whole. */
export const IPV6_PREFIX_BITS_DEFAULT = 64;

/**
 * The client every per-address limit counts a request against: an IPv4 address as it is; an
 * IPv6 address as its network of prefixBits bits (the rest zeroed, as text: 2001:db8:1:2::),
 * since a host given a /64 has 2^64 addresses to spread its requests over. Postfix's
 * anvil and the large CDNs group IPv6 clients the same way. The result is still an IP address.
 */
export function addressGroup(ip: string, prefixBits: number): string {
  const plain = normalizeIp(ip);
  if (!plain.includes(":") || prefixBits >= 128) return plain;
  const bytes = ipv6Bytes(plain);
  for (let bit = prefixBits; bit < 128; bit++) bytes[bit >> 3]! &= ~(0x80 >> (bit & 7));
  return ipv6Text(bytes);
}

/** The 16 bytes of an IPv6 address in text (with "::", an IPv4 tail or a zone). */
export function ipv6Bytes(text: string): Uint8Array {
  let s = text.replace(/%.*$/, "");
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const [a, b, c, d] = v4[1]!.split(".").map(Number);
    s = `${s.slice(0, -v4[1]!.length)}${((a! << 8) | b!).toString(16)}:${((c! << 8) | d!).toString(16)}`;
  }
  const [head, tail] = s.includes("::") ? s.split("::") : [s, undefined];
  const groups = (part: string | undefined) => (part ? part.split(":").map((g) => Number.parseInt(g, 16)) : []);
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill(0), ...t];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  return bytes;
}

/** 16 bytes as IPv6 text in the canonical form (RFC 5952): lower case, the longest run of zero groups as "::". */
export function ipv6Text(bytes: Uint8Array): string {
  const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = (from: number, to: number) =>
    groups
      .slice(from, to)
      .map((g) => g.toString(16))
      .join(":");
  return best.at < 0 ? hex(0, 8) : `${hex(0, best.at)}::${hex(best.at + best.len, 8)}`;
}
