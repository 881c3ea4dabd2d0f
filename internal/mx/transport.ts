// The worker's Transport over MX delivery: a leased message, composed (and signed) by the
// prepare it is given, goes to its recipient's MX hosts with the return path as MAIL FROM. The
// result keeps the worker's three outcomes and carries the MX result (every attempt, the wait a
// reply asked for) for the message's history and the daemon's retry schedule.
import { DeliveryOutcome, type LeaseResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import type { DeliveryResult, Prepared, Transport } from "../worker/transport";
import type { MxDelivery } from "./delivery";
import type { MxResult } from "./destination";

export interface MxDeliveryResult extends DeliveryResult {
  mx: MxResult;
}

const OUTCOME = {
  delivered: DeliveryOutcome.DELIVERED,
  permanent: DeliveryOutcome.BOUNCED,
  temporary: DeliveryOutcome.DEFERRED,
} as const;

export class MxTransport implements Transport {
  readonly name = "MX delivery";

  constructor(
    private readonly delivery: MxDelivery,
    /** Composes and signs a message; the bytes are sent as they are (CRLF line ends). */
    readonly prepare: (m: LeaseResponse) => Promise<Prepared>,
    /** MAIL FROM of a message: its return path (by default its From address, until return paths exist). */
    private readonly returnPath: (m: LeaseResponse) => string = (m) => m.email!.fromAddress,
  ) {}

  async send({ m, raw }: Prepared): Promise<MxDeliveryResult> {
    const mx = await this.delivery.deliver({ returnPath: this.returnPath(m), recipient: m.email!.toAddress, raw });
    return { outcome: OUTCOME[mx.verdict], detail: mx.detail, mx };
  }

  close(): void {
    this.delivery.close();
  }
}
