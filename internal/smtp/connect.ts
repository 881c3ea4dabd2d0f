import type { SMTPServerSession } from "smtp-server";
import { addressGroup } from "../clientip/clientip";
import type { SubmissionFront } from "./front";
import { authThrottled, noSlotInTime, sessionExpired, tooManyConnectionsFromAddress } from "./replies";
import type { AuthThrottle } from "./throttle";

// A connection's first and last stages: its admission before the greeting (a slot of its
// address, or a wait for one), STARTTLS, and its close.

/** The library's early-talker pause, kept for the addresses where it matters (patches.ts). */
export const EARLY_TALKER_PAUSE_MS = 100;

/**
 * How long a connection's greeting is held: an address with failed AUTH attempts not yet
 * drained keeps the early-talker pause (what it sends before its greeting is refused).
 */
export function greetingPauseMs(throttle: AuthThrottle, ip: string): number {
  return throttle.hasFailures(ip) ? EARLY_TALKER_PAUSE_MS : 0;
}

/**
 * onConnect: refused while its address is throttled; greeted once it holds one of its address's
 * slots. An IPv6 client counts by its network (IPV6_PREFIX_BITS), for the slots and the AUTH
 * throttle alike: a host with a /64 is one client, not 2^64.
 */
export function connect(front: SubmissionFront, session: SMTPServerSession, done: (err?: Error | null) => void) {
  const { slots, throttle, o } = front;
  const ip = addressGroup(session.remoteAddress, o.ipv6PrefixBits);
  const throttled = throttle.refusedForSeconds(ip);
  if (throttled > 0) return done(front.refusal(authThrottled(throttled)));
  // AUTH is neither offered nor accepted before STARTTLS (cleared in secured).
  session.disabledCommands = ["AUTH"];
  const s = front.state(session);
  s.ip = ip;
  const pauseMs = greetingPauseMs(throttle, ip);
  const greet = () => {
    clearTimeout(s.waitTimer);
    Object.assign(s, { slot: "address", admit: undefined, waitTimer: undefined });
    s.timer = setTimeout(() => front.closeWhenIdle(session, sessionExpired()), o.sessionTimeoutMs);
    s.timer.unref?.();
    front.armAuthTimer(session);
    if (pauseMs > 0) setTimeout(done, pauseMs);
    else done();
  };
  const arrival = slots.arrive(ip, greet);
  if (arrival === "admitted") return greet();
  if (arrival === "refused")
    return done(front.refusal(tooManyConnectionsFromAddress(o.maxClientsPerIp, o.maxWaitingPerIp)));
  // Its greeting waits for one of its address's slots (another connection authenticates or closes).
  Object.assign(s, { slot: "waiting", admit: greet });
  s.waitTimer = setTimeout(() => {
    slots.stopWaiting(ip, greet);
    Object.assign(s, { slot: undefined, admit: undefined });
    done(front.refusal(noSlotInTime(o.authTimeoutMs)));
  }, o.authTimeoutMs);
  s.waitTimer.unref?.();
}

/** onSecure: after STARTTLS, AUTH is offered. */
export function secured(session: SMTPServerSession, done: (err?: Error | null) => void): void {
  session.disabledCommands = undefined;
  done();
}

/** onClose: the connection's timers stopped, and the slot it held (or waited for) given up. */
export function closed(front: SubmissionFront, session: SMTPServerSession): void {
  const s = front.forget(session);
  if (!s) return;
  clearTimeout(s.timer);
  clearTimeout(s.authTimer);
  clearTimeout(s.waitTimer);
  if (s.slot === "waiting") front.slots.stopWaiting(s.ip!, s.admit!);
  else if (s.slot === "address") front.slots.leaveAddress(s.ip!);
  else if (s.slot === "organization") front.slots.leaveOrganization(s.orgId!);
  s.slot = undefined;
}
