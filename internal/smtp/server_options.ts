import type { SMTPServerOptions } from "smtp-server";

/**
 * What the platform's SMTP servers (the submission front, the inbound MX) set alike on
 * smtp-server: their certificate, enhanced status codes shown, DSN and REQUIRETLS hidden (mail
 * goes on through transports that cannot promise either), no reverse lookup, their client and
 * idle limits, and at shutdown a transaction still running 8 s after drain() cut off (the
 * process exits within 10 s).
 */
export function commonServerOptions(o: {
  name?: string;
  banner: string;
  tls: { cert: Buffer | string; key: Buffer | string };
  size: number;
  maxClients: number;
  socketTimeoutMs: number;
}): SMTPServerOptions {
  return {
    name: o.name,
    banner: o.banner,
    key: o.tls.key,
    cert: o.tls.cert,
    size: o.size,
    hideENHANCEDSTATUSCODES: false,
    hideDSN: true,
    hideREQUIRETLS: true,
    disableReverseLookup: true,
    maxClients: o.maxClients,
    socketTimeout: o.socketTimeoutMs,
    closeTimeout: 8_000,
    logger: false,
  };
}
