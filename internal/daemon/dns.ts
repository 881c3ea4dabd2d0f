import { Resolver } from "node:dns/promises";

/** Looks up the TXT records of a name: each record's strings joined, as RFC 7208 reads them. */
export type TxtLookup = (name: string) => Promise<string[]>;

/** TXT lookups through dnsServer (host:port or an IP), or the system's resolvers when undefined. */
export function txtLookup(dnsServer: string | undefined): TxtLookup {
  const resolver = new Resolver({ timeout: 2_000, tries: 2 });
  if (dnsServer) resolver.setServers([dnsServer]);
  return async (name) => (await resolver.resolveTxt(name)).map((chunks) => chunks.join(""));
}
