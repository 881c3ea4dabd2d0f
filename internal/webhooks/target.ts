import { isIP } from "node:net";
import type { Resolve } from "../dnsquery/resolver";
import { isPrivateAddress } from "../netguard/netguard";

// Where a webhook request goes: the address its host was resolved to and checked, and nowhere
// else. The name is resolved once (internal/dnsquery), every address of the answer is checked
// (internal/netguard: loopback, private, link-local, shared, multicast, reserved, and IPv6 forms
// carrying one of them: mapped, NAT64, 6to4, Teredo, IPv4-compatible), and the request connects
// to the first checked address with the URL's own Host header and TLS server name. Nothing
// resolves the name a second time between the check and the connection: a name whose answer
// changes in between (public for the check, 127.0.0.1 for the request) cannot reach inside.
// Loopback and private targets are allowed only when the operator says so
// (WEBHOOK_ALLOW_PRIVATE_URLS: development, tests).

/** A webhook request pinned to the address that was checked. */
export interface WebhookTarget {
  /** The URL the request is sent to: the original one with its host replaced by the address. */
  connectUrl: string;
  /** The original host, with its port when the URL gave one: the request's Host header. */
  host: string;
  /** The name TLS sends (SNI) and checks the certificate against; undefined when the URL names an address. */
  serverName: string | undefined;
  /** The address connected to. */
  address: string;
}

export type TargetResult = { ok: true; target: WebhookTarget } | { ok: false; error: string };

/** Names that are loopback by definition (RFC 6761), never asked of DNS. */
const LOOPBACK_NAME = /(^|\.)localhost$/;

/** The addresses a host name has (its A records first, then its AAAA records); an error text when there is none. */
async function addressesOf(name: string, resolve: Resolve): Promise<string[] | string> {
  if (LOOPBACK_NAME.test(name)) return ["127.0.0.1"];
  let answers: Awaited<ReturnType<Resolve>>[];
  try {
    answers = await Promise.all([resolve("A", name), resolve("AAAA", name)]);
  } catch (err) {
    return (err as Error).message; // not a DNS name
  }
  const found = answers.flatMap((r) => (r.kind === "found" ? (r.records as string[]) : []));
  if (found.length > 0) return found;
  const failed = answers.find((r) => r.kind === "temporary");
  return failed ? failed.detail : `${name} does not resolve to an address`;
}

/**
 * Resolves the URL's host once and checks every address it has; the request is pinned to the
 * first (an IPv4 address when there is one). An error says why there is no target: the name does
 * not resolve, the lookup failed, or an address is one a webhook may not reach.
 */
export async function webhookTarget(url: string, resolve: Resolve, allowPrivate: boolean): Promise<TargetResult> {
  const u = new URL(url);
  const name = u.hostname.replace(/^\[(.*)\]$/, "$1");
  const addresses = isIP(name) ? [name] : await addressesOf(name, resolve);
  if (typeof addresses === "string") return { ok: false, error: addresses };
  const bad = allowPrivate ? undefined : addresses.find(isPrivateAddress);
  if (bad !== undefined) return { ok: false, error: `refused: ${name} is a private address (${bad})` };
  const address = addresses[0]!;
  const host = u.host;
  u.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return {
    ok: true,
    target: { connectUrl: u.toString(), host, serverName: isIP(name) ? undefined : name, address },
  };
}
