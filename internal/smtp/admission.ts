// Who may hold an SMTP session. Before AUTH a session counts for its client address: idle
// sockets and guessing clients are what an address cap stops. After a successful AUTH it counts
// for its organization instead, so that an application fleet behind one NAT address is bounded
// by its organization, not by the address it shares. A connection above its address's cap is
// not refused at once (a fleet that connects at the same instant is unauthenticated for a few
// ms): it waits, before its greeting, for one of that address's slots to free, in a bounded
// waiting room. In memory, per SMTP front.

export interface AdmissionLimits {
  /** Unauthenticated sessions one address may hold at once (SMTP_MAX_CLIENTS_PER_IP). */
  perAddress: number;
  /** Connections of one address waiting for a slot before their greeting (SMTP_MAX_WAITING_PER_IP). */
  waitingPerAddress: number;
  /** Authenticated sessions one organization may hold at once (SMTP_MAX_SESSIONS_PER_ORG). */
  perOrganization: number;
}

/** What happens to a new connection: served now, queued until a slot frees, or refused. */
export type Arrival = "admitted" | "waiting" | "refused";

export class SessionSlots {
  private readonly unauthenticated = new Map<string, number>();
  /** Per address, the admit callbacks of the waiting connections, oldest first. */
  private readonly waiting = new Map<string, Set<() => void>>();
  private readonly authenticated = new Map<string, number>();

  constructor(private readonly limits: AdmissionLimits) {}

  /** A new connection from ip. When "waiting", admit is called once the connection holds a slot. */
  arrive(ip: string, admit: () => void): Arrival {
    const held = this.unauthenticated.get(ip) ?? 0;
    if (held < this.limits.perAddress) {
      this.unauthenticated.set(ip, held + 1);
      return "admitted";
    }
    const queue = this.waiting.get(ip) ?? new Set();
    if (queue.size >= this.limits.waitingPerAddress) return "refused";
    queue.add(admit);
    this.waiting.set(ip, queue);
    return "waiting";
  }

  /** A waiting connection gives up (it closed, or waited too long). */
  stopWaiting(ip: string, admit: () => void): void {
    const queue = this.waiting.get(ip);
    queue?.delete(admit);
    if (queue?.size === 0) this.waiting.delete(ip);
  }

  /** An admitted connection stops counting for its address (it authenticated or closed); its slot goes to the longest waiting one. */
  leaveAddress(ip: string): void {
    const next = this.waiting.get(ip)?.values().next().value;
    if (next) {
      this.stopWaiting(ip, next);
      next();
      return;
    }
    const left = (this.unauthenticated.get(ip) ?? 1) - 1;
    if (left > 0) this.unauthenticated.set(ip, left);
    else this.unauthenticated.delete(ip);
  }

  /** At a successful AUTH: false when the organization already holds its share of sessions. */
  joinOrganization(org: string): boolean {
    const held = this.authenticated.get(org) ?? 0;
    if (held >= this.limits.perOrganization) return false;
    this.authenticated.set(org, held + 1);
    return true;
  }

  /** An authenticated session closed. */
  leaveOrganization(org: string): void {
    const left = (this.authenticated.get(org) ?? 1) - 1;
    if (left > 0) this.authenticated.set(org, left);
    else this.authenticated.delete(org);
  }
}
