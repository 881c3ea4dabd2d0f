import { Code, ConnectError } from "@connectrpc/connect";
import type { SendingDomainInfo } from "../gen/mailcore/limiter/v1/domains_pb";
import { type Admitted, error, type Handler, iso, json } from "./respond";
import { body, decoded, route } from "./resource";

// /api/v1/domains: an organization's sending domains and the DNS records each publishes, over
// the daemon's DomainService (which makes the DKIM keys; no private key ever comes here).

function domainJson(d: SendingDomainInfo) {
  return {
    id: d.id,
    name: d.name,
    status: d.status,
    records: d.records.map((r) => ({
      purpose: r.purpose,
      type: r.type,
      name: r.name,
      value: r.value,
      status: r.status,
      reason: r.reason || null,
    })),
    createdAt: iso(d.createdAtMs),
    checkedAt: d.checkedAtMs === 0n ? null : iso(d.checkedAtMs),
  };
}

/** The resource endpoints' answers, and: a domain taken 409, a rotation pending 409. */
function domainRoute(run: Handler): Handler {
  const inner = route(run);
  return async (front, a) => {
    try {
      return await inner(front, a);
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      if (err.code === Code.AlreadyExists) return error(409, "DOMAIN_TAKEN", `${err.rawMessage}.`, a.headers);
      if (err.code === Code.FailedPrecondition) return error(409, "ROTATION_PENDING", `${err.rawMessage}.`, a.headers);
      throw err;
    }
  };
}

const domainRef = (a: Admitted) => ({ domainId: decoded(a.params[0]!) });

/**
 * POST /api/v1/domains: {"name": ...}; its DKIM keys are made with it. A name that is not a
 * domain is refused 422 by the contract's format domain-name, the daemon's own rule.
 */
export const createDomain = domainRoute(async ({ ports, records }, a) => {
  const b = (await body(a)) as { name: string };
  const { domain } = await ports.domains.createDomain({ name: b.name }, records);
  return json(201, domainJson(domain!), a.headers);
});

/** GET /api/v1/domains: every domain of the organization, by name. */
export const listDomains = domainRoute(async ({ ports, records }, a) => {
  const { domains } = await ports.domains.listSendingDomains({}, records);
  return json(200, { data: domains.map(domainJson) }, a.headers);
});

/** GET /api/v1/domains/{id}: its records as last checked. */
export const getDomain = domainRoute(async ({ ports, records }, a) =>
  json(200, domainJson((await ports.domains.getDomain(domainRef(a), records)).domain!), a.headers),
);

/** POST /api/v1/domains/{id}/verify: its records checked against DNS now; dnsAnswered false when DNS did not answer (nothing changed). */
export const verifyDomain = domainRoute(async ({ ports, records }, a) => {
  const res = await ports.domains.checkDomain(domainRef(a), records);
  return json(200, { ...domainJson(res.domain!), dnsAnswered: !res.dnsUnavailable }, a.headers);
});

/** POST /api/v1/domains/{id}/dkim/rotate: a pending key under a new selector. */
export const rotateDomainKey = domainRoute(async ({ ports, records }, a) =>
  json(200, domainJson((await ports.domains.rotateDkimKey(domainRef(a), records)).domain!), a.headers),
);

/** DELETE /api/v1/domains/{id}. */
export const deleteDomain = domainRoute(async ({ ports, records }, a) => {
  await ports.domains.deleteDomain(domainRef(a), records);
  return new Response(null, { status: 204, headers: a.headers });
});
