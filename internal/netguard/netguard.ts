import { BlockList, isIP } from "node:net";
import { ipv6Bytes } from "../clientip/clientip";

// Which addresses a connection the platform makes on someone else's behalf (a webhook, an MX
// host a recipient domain names) must not reach: the platform's own network and the ranges that
// are never a public host. An IPv6 address that carries an IPv4 address (IPv4-mapped, NAT64,
// 6to4, Teredo, IPv4-compatible) is judged by the IPv4 address too, so a domain cannot reach
// 10.0.0.1 by publishing 64:ff9b::a00:1.

const V4: [string, number][] = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local (cloud metadata)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.88.99.0", 24], // 6to4 relay anycast
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // documentation
  ["203.0.113.0", 24], // documentation
  ["224.0.0.0", 3], // multicast, reserved, broadcast
];
const V6: [string, number][] = [
  ["::", 127], // unspecified and loopback
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64], // discard-only
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated, still routed inside some networks)
  ["ff00::", 8], // multicast
];

const PRIVATE = new BlockList();
for (const [net, bits] of V4) PRIVATE.addSubnet(net, bits, "ipv4");
for (const [net, bits] of V6) PRIVATE.addSubnet(net, bits, "ipv6");

const dotted = (b: Uint8Array, at: number) => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;
const zeros = (b: Uint8Array, from: number, to: number) => b.subarray(from, to).every((x) => x === 0);

/** The IPv4 address an IPv6 address carries, if it is of a form that carries one. */
export function embeddedIPv4(ip: string): string | undefined {
  if (isIP(ip) !== 6) return undefined;
  const b = ipv6Bytes(ip);
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible; :: and ::1 are judged as IPv6).
  if (zeros(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return dotted(b, 12);
  if (zeros(b, 0, 12) && !zeros(b, 12, 15)) return dotted(b, 12);
  // 64:ff9b::/96, the well-known NAT64 prefix (RFC 6052).
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(b, 4, 12)) return dotted(b, 12);
  // 2002::/16, 6to4 (RFC 3056): the IPv4 address follows the prefix.
  if (b[0] === 0x20 && b[1] === 0x02) return dotted(b, 2);
  // 2001::/32, Teredo (RFC 4380): the client's address, inverted, in the last 32 bits.
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0)
    return dotted(
      b.subarray(12).map((x) => x ^ 0xff),
      0,
    );
  return undefined;
}

/** Whether ip (IPv4 or IPv6) is an address the platform must not connect to for someone else. */
export function isPrivateAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 0) return true; // not an address: nothing to connect to safely
  if (family === 4) return PRIVATE.check(ip, "ipv4");
  if (PRIVATE.check(ip.replace(/%.*$/, ""), "ipv6")) return true;
  const v4 = embeddedIPv4(ip);
  return v4 !== undefined && PRIVATE.check(v4, "ipv4");
}
