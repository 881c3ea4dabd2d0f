// SMTP clients of the load scripts: nodemailer over STARTTLS with an API token.
import { createTransport } from "nodemailer";

export interface Org {
  slug: string;
  token: string;
}

/**
 * Each client loop connects from an address of its own in 127.0.1.0/24 (all loopback), which
 * the SMTP front passes on as X-Forwarded-For; the API trusts the front (TRUST_PROXY), so
 * its 500/s per-IP limit applies per client, as in production, not to the front as a whole.
 */
export const clientAddress = (loop: number) => `127.0.1.${(loop % 250) + 1}`;

export function smtpTransport(port: number, org: Org, pool: boolean, loop: number) {
  return createTransport({
    host: "127.0.0.1",
    port,
    localAddress: clientAddress(loop),
    secure: false,
    requireTLS: true,
    tls: { rejectUnauthorized: false },
    auth: { user: org.slug, pass: org.token },
    pool,
    maxConnections: 1,
    maxMessages: Number.POSITIVE_INFINITY,
    connectionTimeout: 10_000,
    socketTimeout: 30_000,
  });
}
