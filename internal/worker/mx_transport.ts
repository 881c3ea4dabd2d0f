// The worker's Transport over MX delivery: a leased message, composed (and signed) by the
// prepare it is given, goes to its recipient's MX hosts with the lease's return path as MAIL
// FROM. The result carries what the ack needs: the outcome by the one classification of
// refusals, the classification itself, the wait a reply asked for, and every try for the
// message's history; a deferral is retried on the schedule in hours.
// Built from the worker's configuration by mxTransport: the route over the project's resolver
// (DNS_SERVER, MX_ALLOW_PRIVATE), kept a minute, MTA-STS policies fetched over HTTPS and cached,
// and the shaping file.
import type { Attempt } from "../mx/outcome";
import type { DeliveryAttemptRecord } from "../model/history";
import type { MxConfig } from "../config/config";
import type { MxResult } from "../mx/destination";
import { DeliveryOutcome, type LeaseResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import { MxDelivery } from "../mx/delivery";
import { cachedRouteLookup, routeLookup } from "../mx/route";
import type { Resolve } from "../dnsquery/resolver";
import { httpsPolicyFetch, MtaStsCache } from "../mx/mtasts";
import { loadShaping } from "../mx/shaping";
import { type DeliveryResult, outcomeOfRefusal, type Prepared, returnPathOf, type Transport } from "./transport";

export interface MxDeliveryResult extends DeliveryResult {
  mx: MxResult;
}

export class MxTransport implements Transport {
  readonly name = "MX delivery";
  readonly retryInHours = true;

  constructor(
    private readonly delivery: MxDelivery,
    /** Composes and signs a message; the bytes are sent as they are (CRLF line ends). */
    readonly prepare: (m: LeaseResponse) => Promise<Prepared>,
  ) {}

  async send({ m, raw }: Prepared): Promise<MxDeliveryResult> {
    const mx = await this.delivery.deliver({ returnPath: returnPathOf(m), recipient: m.email!.toAddress, raw });
    const outcome =
      mx.verdict === "delivered"
        ? DeliveryOutcome.DELIVERED
        : mx.verdict === "temporary"
          ? DeliveryOutcome.DEFERRED
          : outcomeOfRefusal(mx.bounce!);
    return {
      outcome,
      detail: mx.detail,
      bounce: mx.bounce,
      retryAfterMs: mx.retryAfterMs,
      attempts: mx.attempts.map(historyOf),
      mx,
    };
  }

  /** The destinations known now (admin, metrics). */
  states() {
    return this.delivery.states();
  }

  close(): void {
    this.delivery.close();
  }
}

/** A try as the message's history keeps it. */
function historyOf(a: Attempt): DeliveryAttemptRecord {
  return {
    atMs: a.atMs,
    host: a.host,
    address: a.address,
    tls: a.tls,
    stage: a.stage,
    reply: a.reply ?? a.error ?? "",
    enhancedCode: a.enhanced ?? "",
  };
}

export interface MxTransportOptions {
  /** Composes (and signs) a leased message: the bytes sent as they are. */
  prepare: (m: LeaseResponse) => Promise<Prepared>;
  /**
   * Most messages one destination holds waiting for its connections: a destination that is slow
   * or shaped down never holds more of the worker's deliveries in flight than this; one more
   * message is handed back at once as a deferral.
   */
  maxQueued: number;
  /** The worker's resolver (DNS_SERVER). */
  resolve: Resolve;
}

export function mxTransport(cfg: MxConfig, o: MxTransportOptions): MxTransport {
  const ca = cfg.trustedCa?.toString("utf8");
  const sts = new MtaStsCache({
    resolve: o.resolve,
    fetch: httpsPolicyFetch({ resolve: o.resolve, allowPrivate: cfg.allowPrivate, ...(ca ? { ca } : {}) }),
  });
  const delivery = new MxDelivery({
    resolveRoute: cachedRouteLookup(routeLookup(o.resolve, { allowPrivate: cfg.allowPrivate })),
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
