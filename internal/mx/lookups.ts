import type { StsRule } from "./mtasts";

// What delivery needs to know from DNS, as two functions passed in: the route to a domain's
// mail hosts (MX by preference, the implicit MX, a null MX refused) and the domain's MTA-STS
// policy. The lookups themselves, their caches and the refusal of private addresses live with
// the resolver; delivery only uses their answers.

/** One mail host of a domain: its name and the addresses to try, in order. */
export interface RouteHost {
  name: string;
  addresses: string[];
}

/** Where a domain's mail goes: its hosts, most preferred first (ties already shuffled). */
export interface Route {
  hosts: RouteHost[];
}

/**
 * Resolves a recipient domain's route. A rejection whose error has `permanent: true` (a null
 * MX, no such domain, only addresses delivery may not use) fails the message at once, and its
 * `status` (an enhanced status code: route.ts's RouteError) says whose fault it is; any other
 * rejection (a resolver timing out, SERVFAIL) is a temporary failure.
 */
export type ResolveRoute = (domain: string) => Promise<Route>;

/** The policy of a recipient domain, or undefined when it has none (a failed lookup with nothing cached: none). */
export type LookupMtaSts = (domain: string) => Promise<StsRule | undefined>;

/** Whether an error of ResolveRoute says the domain cannot get mail at all. */
export function isPermanentRouteError(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { permanent?: unknown }).permanent === true;
}
