import { join } from "node:path";
import type { WorkerConfig } from "../config/config";
import type { DiskSpace } from "../diskspace/diskspace";
import type { Resolve } from "../dnsquery/resolver";
import { mxTransport } from "./mx_transport";
import { composer, FileSink, SmtpRelay, type Transport } from "./transport";

/**
 * The transport DELIVERY names: the recipients' MX hosts, the relay at SMTP_RELAY_URL, or the
 * file sink under DATA_DIR/sink. Under MX delivery one destination holds at most a quarter of
 * the worker's deliveries in flight waiting for its connections, so a slow or shaped-down
 * destination leaves the rest to the others.
 */
export function deliveryTransport(cfg: WorkerConfig, disk: DiskSpace, resolve: Resolve): Transport {
  switch (cfg.delivery) {
    case "mx":
      return mxTransport(cfg.mx!, { prepare: composer(), maxQueued: Math.ceil(cfg.maxInFlight / 4), resolve });
    case "relay":
      return new SmtpRelay(cfg.relayUrl!);
    case "file":
      return new FileSink(join(cfg.dataDir, "sink"), disk);
  }
}
