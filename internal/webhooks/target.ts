import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isPrivateAddress } from "../netguard/netguard";

// Where a webhook may be sent: not into the service's own network. A URL whose host is, or
// resolves to, an address netguard refuses (loopback, private, link-local, shared, multicast,
// reserved, or an IPv6 address carrying one) is refused unless the operator allows it
// (WEBHOOK_ALLOW_PRIVATE_URLS: development, tests).

/** Why the URL's host may not be called, or undefined when it may; rejects when the name does not resolve. */
export async function refusedTarget(url: string): Promise<string | undefined> {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  const bad = addresses.find(isPrivateAddress);
  return bad === undefined ? undefined : `refused: ${host} is a private address (${bad})`;
}
