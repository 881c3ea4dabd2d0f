import { createHmac, timingSafeEqual } from "node:crypto";

// Admission tickets: the daemon's proof, handed to a front with an admission (or a console
// session), of the organization the front's request is for. The front sends it back with each
// organization-scoped call of that request; the daemon takes the organization from it alone,
// so a front cannot act for an organization it was not admitted for. A ticket is
// <org id>.<expiry, Unix seconds>.<MAC>, the MAC an HMAC-SHA256 (the first 128 bits) of the
// rest under a key derived from the master key, which only the daemons hold.

/** How long a ticket is good for when made. */
export const TICKET_TTL_MS = 120_000;
/**
 * A ticket is handed out again while it is good for at least this long, so that each
 * organization's is made once a minute, not once a request; every ticket handed out is then
 * good for at least a minute, longer than any one request's calls take.
 */
export const TICKET_MIN_LEFT_MS = 60_000;
const MAC_BYTES = 16;
/** Tickets kept, made and verified, each (past it, that cache starts over). */
const CACHE_MAX = 10_000;

export type TicketCheck = { orgId: string } | { refused: "malformed" | "forged" | "expired" };

export class Tickets {
  private readonly issued = new Map<string, { ticket: string; expiresMs: number }>();
  private readonly verified = new Map<string, { orgId: string; expiresMs: number }>();

  constructor(
    /** The key of the MAC: masterKey.derive("plane-ticket"). */
    private readonly key: Buffer,
    /** Wall-clock ms (several daemons verify each other's tickets). */
    private readonly now: () => number,
  ) {}

  /** A ticket for orgId, good for at least TICKET_MIN_LEFT_MS from nowMs (a batch reads the clock once). */
  issue(orgId: string, nowMs = this.now()): string {
    const kept = this.issued.get(orgId);
    if (kept && kept.expiresMs - nowMs >= TICKET_MIN_LEFT_MS) return kept.ticket;
    const expiresS = Math.ceil((nowMs + TICKET_TTL_MS) / 1_000);
    const body = `${orgId}.${expiresS}`;
    const ticket = `${body}.${this.mac(body).toString("base64url")}`;
    if (this.issued.size >= CACHE_MAX) this.issued.clear();
    this.issued.set(orgId, { ticket, expiresMs: expiresS * 1_000 });
    return ticket;
  }

  /** The organization a ticket is for, or why it is refused. */
  check(ticket: string): TicketCheck {
    const nowMs = this.now();
    const hit = this.verified.get(ticket);
    if (hit) return hit.expiresMs > nowMs ? { orgId: hit.orgId } : { refused: "expired" };
    // From the right: the org id is the daemon's own, but the parse does not rely on its form.
    const macAt = ticket.lastIndexOf(".");
    const expiresAt = ticket.lastIndexOf(".", macAt - 1);
    if (expiresAt <= 0) return { refused: "malformed" };
    const expires = ticket.slice(expiresAt + 1, macAt);
    const mac = Buffer.from(ticket.slice(macAt + 1), "base64url");
    if (!/^\d{1,12}$/.test(expires) || mac.length !== MAC_BYTES) return { refused: "malformed" };
    if (!timingSafeEqual(mac, this.mac(ticket.slice(0, macAt)))) return { refused: "forged" };
    const expiresMs = Number(expires) * 1_000;
    if (expiresMs <= nowMs) return { refused: "expired" };
    const orgId = ticket.slice(0, expiresAt);
    if (this.verified.size >= CACHE_MAX) this.verified.clear();
    this.verified.set(ticket, { orgId, expiresMs });
    return { orgId };
  }

  private mac(body: string): Buffer {
    return createHmac("sha256", this.key).update(body).digest().subarray(0, MAC_BYTES);
  }
}
