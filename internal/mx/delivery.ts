// Delivery of one message to its recipient's MX hosts: the route and the MTA-STS policy from
// the lookups passed in, the destination they make (its hosts and TLS mode), and the
// destination's queue and connections. The result says delivered, permanent or temporary,
// with every attempt's facts for the message's history.
import { classify as classifyRefusal } from "../feedback/classify";
import { domainOf } from "../mail/policy";
import { systemTimerClock, type TimerClock } from "../clock/clock";
import { Destination, type DestinationState, type MxResult } from "./destination";
import { isPermanentRouteError, type LookupMtaSts, type ResolveRoute, type RouteHost } from "./lookups";
import { policyAllows } from "./mtasts";
import { type Attempt, classify } from "./outcome";
import { DEFAULT_TIMEOUTS, type SessionTimeouts, type TlsMode } from "./session";
import { ruleFor, type Shaping } from "./shaping";

export interface MxDeliveryOptions {
  resolveRoute: ResolveRoute;
  lookupMtaSts: LookupMtaSts;
  shaping: Shaping;
  /** Our name in EHLO (MX_HELO_NAME). */
  heloName: string;
  /** The port of every MX (MX_PORT: 25; tests use another). */
  port: number;
  timeouts?: SessionTimeouts;
  /** Longest a message waits in its destination's queue (default 30 s). */
  maxWaitMs?: number;
  /** Most messages waiting in one destination's queue (default: no bound); more are deferred at once. */
  maxQueued?: number;
  /** An idle connection is closed after this (default 10 s). */
  idleMs?: number;
  /** Addresses tried to open one connection (default 5). */
  maxAddresses?: number;
  /** How long a destination none of whose addresses gave a session is left alone (default 60 s). */
  suspendMs?: number;
  time?: TimerClock;
  /** Certificates trusted besides the system's, for verified TLS (tests: a CA of their own). */
  trustedCa?: string[];
}

/** One message: the envelope (the return path is MAIL FROM) and the bytes, already signed. */
export interface Outgoing {
  returnPath: string;
  recipient: string;
  raw: Buffer;
}

/** How long a failing destination is remembered without news (a retry of its mail brings some every 2 hours at most). */
const FAILING_KEPT_MS = 3 * 3_600_000;

export class MxDelivery {
  private readonly destinations = new Map<string, Destination>();
  /**
   * Destinations whose tries fail for now, by key: since when, and the last news. Kept apart
   * from the destinations, which are forgotten while idle between the retries of their mail.
   */
  private readonly failing = new Map<string, { sinceMs: number; lastMs: number }>();

  constructor(private readonly o: MxDeliveryOptions) {}

  /** Delivers one message; never rejects. */
  async deliver(m: Outgoing): Promise<MxResult> {
    const domain = domainOf(m.recipient).toLowerCase();
    let hosts: RouteHost[];
    try {
      hosts = (await this.o.resolveRoute(domain)).hosts;
    } catch (err) {
      return noRoute(domain, err, this.now());
    }
    const policy = await this.o.lookupMtaSts(domain).catch(() => undefined);
    const enforce = policy?.mode === "enforce";
    if (enforce) {
      hosts = hosts.filter((h) => policyAllows(policy, h.name));
      if (hosts.length === 0) {
        return temporary(this.now(), "mail", `no MX host of ${domain} is listed by its MTA-STS policy (enforce)`);
      }
    }
    const destination = this.destinationOf(hosts, enforce);
    const result = await destination.deliver({ hosts, ...m });
    this.noteHealth(destination.state().key, result);
    if (destination.isIdle()) this.forget(destination);
    return result;
  }

  /**
   * Every destination known now, and those failing, for admin and metrics: a destination is
   * failing from its first try that failed for now until a try that a host answered for good
   * (delivered, or refused for good); a message held back in the queue says nothing either way.
   */
  states(): DestinationState[] {
    const now = this.now();
    for (const [key, f] of this.failing) if (now - f.lastMs > FAILING_KEPT_MS) this.failing.delete(key);
    const states = new Map([...this.destinations.values()].map((d) => [d.state().key, d.state()]));
    for (const [key, f] of this.failing) {
      const s = states.get(key) ?? {
        key,
        rule: "",
        queued: 0,
        connections: 0,
        idle: 0,
        slowedUntilMs: 0,
        suspendedUntilMs: 0,
        failingSinceMs: 0,
      };
      states.set(key, { ...s, failingSinceMs: f.sinceMs });
    }
    return [...states.values()];
  }

  private noteHealth(key: string, result: MxResult): void {
    const last = result.attempts.at(-1);
    if (!last || last.stage === "queue") return;
    const now = this.now();
    if (result.verdict !== "temporary") this.failing.delete(key);
    else this.failing.set(key, { sinceMs: this.failing.get(key)?.sinceMs ?? last.atMs, lastMs: now });
  }

  close(): void {
    for (const d of this.destinations.values()) d.close();
    this.destinations.clear();
  }

  /**
   * The destination of a set of hosts: their names sorted (the order of equal preferences is
   * shuffled per lookup), and whether TLS must be verified (an MTA-STS enforce domain's mail
   * never shares a connection opened without checking the certificate).
   */
  private destinationOf(hosts: RouteHost[], verified: boolean): Destination {
    const names = hosts.map((h) => h.name.toLowerCase());
    const key = `${[...names].sort().join(",")}${verified ? " (MTA-STS)" : ""}`;
    let d = this.destinations.get(key);
    if (!d) {
      const rule = ruleFor(this.o.shaping, names);
      const tls: TlsMode = verified ? "verified" : rule.limits.tlsRequired ? "required" : "opportunistic";
      d = new Destination({
        key,
        rule,
        shaping: this.o.shaping,
        tls,
        port: this.o.port,
        heloName: this.o.heloName,
        timeouts: this.o.timeouts ?? DEFAULT_TIMEOUTS,
        trustedCa: this.o.trustedCa,
        time: this.o.time ?? systemTimerClock,
        maxWaitMs: this.o.maxWaitMs ?? 30_000,
        maxQueued: this.o.maxQueued ?? Number.POSITIVE_INFINITY,
        idleMs: this.o.idleMs ?? 10_000,
        maxAddresses: this.o.maxAddresses ?? 5,
        suspendMs: this.o.suspendMs ?? 60_000,
      });
      this.destinations.set(key, d);
    }
    return d;
  }

  private forget(d: Destination): void {
    const key = d.state().key;
    if (this.destinations.get(key) === d) this.destinations.delete(key);
  }

  private now(): number {
    return (this.o.time ?? systemTimerClock).nowMs();
  }
}

function noRoute(domain: string, err: unknown, atMs: number): MxResult {
  const error = `no route to ${domain}: ${(err as Error).message ?? String(err)}`;
  if (!isPermanentRouteError(err)) return temporary(atMs, "connect", error);
  const attempt: Attempt = { atMs, host: "", address: "", tls: "none", stage: "connect", verdict: "permanent", error };
  // What the status of the route's refusal says: a null MX or no such domain is the mailbox's,
  // hosts on addresses we do not connect to are our policy's.
  const status = (err as { status?: string }).status;
  const bounce = classifyRefusal({ status, text: error, final: true });
  return { verdict: "permanent", attempts: [attempt], bounce, detail: error };
}

function temporary(atMs: number, stage: Attempt["stage"], error: string): MxResult {
  const attempt: Attempt = { atMs, host: "", address: "", tls: "none", stage, verdict: "temporary", error };
  return { verdict: "temporary", attempts: [attempt], bounce: classify({ stage, error }).bounce, detail: error };
}
