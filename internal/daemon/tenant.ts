import { Code, ConnectError, type ContextValues, createContextKey, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "../log/log";
import { TICKET_RPCS } from "../plane/roles";
import { TICKET_HEADER } from "../wire/metadata";
import type { Tickets } from "./tickets";

// The organization an organization-scoped RPC acts for: the admission ticket's (tickets.ts),
// checked by the interceptor before the handler runs and put in the call's context. The
// handlers take it from there only; their requests have no organization field.

const TENANT = createContextKey<string | undefined>(undefined, { description: "the ticket's organization" });

/** The RPCs of the role table whose organization is a ticket's: each call refused without a valid one. */
export function tenantGate(tickets: Pick<Tickets, "check">, log: Logger): Interceptor {
  return (next) => async (req) => {
    const path = `/${req.service.typeName}/${req.method.name}`;
    if (!TICKET_RPCS.has(path)) return next(req);
    const ticket = req.header.get(TICKET_HEADER);
    const checked = ticket === null ? { refused: "missing" as const } : tickets.check(ticket);
    if ("refused" in checked) {
      log.warn("refused an RPC: no valid admission ticket", { rpc: path, ticket: checked.refused });
      throw new ConnectError(
        `${path} acts for the organization of a valid admission ticket only (${TICKET_HEADER}: ${checked.refused})`,
        Code.Unauthenticated,
      );
    }
    req.contextValues.set(TENANT, checked.orgId);
    return next(req);
  };
}

/** The call's organization, as tenantGate found it in its ticket (a handler's ctx.values, an interceptor's req.contextValues). */
export function tenantOf(values: ContextValues): string {
  const orgId = tenantIn(values);
  // Only when a service is served without tenantGate: nothing is done for an organization then.
  if (orgId === undefined) throw new ConnectError("no organization: the call's ticket was not checked", Code.Internal);
  return orgId;
}

/** The call's organization when it is an organization-scoped RPC's; undefined for any other. */
export function tenantIn(values: ContextValues): string | undefined {
  return values.get(TENANT);
}
