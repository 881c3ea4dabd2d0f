import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

// Where a webhook may be sent: not into the service's own network. A URL whose host is, or
// resolves to, a loopback, private, link-local, shared, multicast or reserved address is
// refused unless the operator allows it (WEBHOOK_ALLOW_PRIVATE_URLS: development, tests).

const PRIVATE = new BlockList();
const V4: [string, number][] = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3],
];
const V6: [string, number][] = [
  ["::", 127], // unspecified and loopback
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
];
for (const [net, bits] of V4) PRIVATE.addSubnet(net, bits, "ipv4");
for (const [net, bits] of V6) PRIVATE.addSubnet(net, bits, "ipv6");

/** Whether ip (v4, v6, or v4-mapped v6) is an address a webhook must not reach. */
export function isPrivateAddress(ip: string): boolean {
  return PRIVATE.check(ip, isIP(ip) === 6 ? "ipv6" : "ipv4");
}

/** Why the URL's host may not be called, or undefined when it may; rejects when the name does not resolve. */
export async function refusedTarget(url: string): Promise<string | undefined> {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  const bad = addresses.find(isPrivateAddress);
  return bad === undefined ? undefined : `refused: ${host} is a private address (${bad})`;
}
