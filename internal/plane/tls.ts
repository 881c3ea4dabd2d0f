// The internal plane's TLS: what limiterd and its clients read at start, and who a client
// certificate says its holder is.
import type { PeerCertificate } from "node:tls";

/**
 * The roles a client certificate can name, each as a URI SAN urn:mailcore:role:<role>: the API
 * front, the SMTP front (which only checks tokens), the inbound MX (which only hands in what
 * comes back to the return paths), the delivery workers and the operator.
 */
export type Role = "front" | "smtp" | "inbound" | "worker" | "admin";
export const ROLES: readonly Role[] = ["front", "smtp", "inbound", "worker", "admin"];
const ROLE_URI_PREFIX = "urn:mailcore:role:";

export function roleUri(role: Role): string {
  return `${ROLE_URI_PREFIX}${role}`;
}

/** limiterd's side: its certificate and key, and the CA whose client certificates it accepts (PEM). */
export interface ServerTls {
  cert: Buffer;
  key: Buffer;
  clientCa: Buffer;
}

/** A client's side: the CA that verifies the daemon (undefined: the system's), and its own certificate and key. */
export interface ClientTls {
  ca: Buffer | undefined;
  cert: Buffer;
  key: Buffer;
}

/** The holder of a verified client certificate. */
export interface Peer {
  /** The certificate's subject, as "CN=front" (for logs). */
  subject: string;
  roles: ReadonlySet<Role>;
}

/** Who a verified client certificate names: its subject and the roles in its URI SANs (others are ignored). */
export function peerOf(cert: PeerCertificate): Peer {
  const roles = new Set<Role>();
  // subjectaltname as node:tls spells it: "DNS:a, URI:urn:mailcore:role:front, IP Address:..."
  for (const name of (cert.subjectaltname ?? "").split(", ")) {
    if (!name.startsWith(`URI:${ROLE_URI_PREFIX}`)) continue;
    const role = name.slice(4 + ROLE_URI_PREFIX.length);
    if ((ROLES as readonly string[]).includes(role)) roles.add(role as Role);
  }
  const subject = Object.entries(cert.subject ?? {})
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("+") : v}`)
    .join(", ");
  return { subject, roles };
}
