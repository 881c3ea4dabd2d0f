// The MX transport as a worker runs it, from its configuration: the route over the project's
// resolver (DNS_SERVER, MX_ALLOW_PRIVATE), kept a minute, MTA-STS policies fetched over HTTPS and cached, the
// shaping file, and the composer (and signer) of the worker's other transports.
import type { MxConfig } from "../config/config";
import { dnsResolver } from "../dnsquery/resolver";
import type { LeaseResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Prepared } from "../worker/transport";
import { MxDelivery } from "./delivery";
import { httpsPolicyFetch, MtaStsCache } from "./mtasts";
import { cachedRouteLookup, routeLookup } from "./route";
import { loadShaping } from "./shaping";
import { MxTransport } from "./transport";

export interface MxTransportOptions {
  /** Composes (and signs) a leased message: the bytes sent as they are. */
  prepare: (m: LeaseResponse) => Promise<Prepared>;
  /**
   * Most messages one destination holds waiting for its connections: a destination that is slow
   * or shaped down never holds more of the worker's deliveries in flight than this; one more
   * message is handed back at once as a deferral.
   */
  maxQueued: number;
}

export function mxTransport(cfg: MxConfig, o: MxTransportOptions): MxTransport {
  const resolve = dnsResolver({ server: cfg.dnsServer });
  const ca = cfg.trustedCa?.toString("utf8");
  const sts = new MtaStsCache({
    resolve,
    fetch: httpsPolicyFetch({ resolve, allowPrivate: cfg.allowPrivate, ...(ca ? { ca } : {}) }),
  });
  const delivery = new MxDelivery({
    resolveRoute: cachedRouteLookup(routeLookup(resolve, { allowPrivate: cfg.allowPrivate })),
    lookupMtaSts: async (domain) => (await sts.lookup(domain)).policy,
    shaping: loadShaping(cfg.shapingFile),
    heloName: cfg.heloName,
    port: cfg.port,
    timeouts: cfg.timeouts,
    maxQueued: o.maxQueued,
    ...(ca ? { trustedCa: [ca] } : {}),
  });
  return new MxTransport(delivery, o.prepare);
}
