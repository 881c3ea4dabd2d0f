import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import type { RecordHitRequest, TrackingService } from "../gen/mailcore/limiter/v1/feedback_pb";
import type { Email } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Records } from "../records/records";
import { BURST_WINDOW_MS, classifyHit } from "../tracking/machine";
import { applyTracking } from "../tracking/rewrite";
import { readToken } from "../tracking/token";
import { guard } from "./rpc_errors";

// Open and click tracking in the daemon, which alone holds the tracking key
// (masterKey.derive("tracking")): a tracked message's HTML rewritten as it is leased (before the
// worker composes and signs it), and each hit on a tracking URL checked, classified (a person's
// or a machine's) and recorded (TrackingService, for the API front, which serves /t/o/ and /t/c/).

export interface TrackingKeys {
  /** PUBLIC_URL: where the API serves /t/o/ and /t/c/. */
  publicUrl: string;
  key: Uint8Array;
}

/** The List-Unsubscribe target of a message's headers, which is never tracked. */
function unsubscribeTargets(email: Email): string[] {
  const value = Object.entries(email.headers).find(([name]) => name.toLowerCase() === "list-unsubscribe")?.[1];
  return [...(value ?? "").matchAll(/<(https?:[^>]+)>/g)].map((m) => m[1]!);
}

/** The email a worker is leased: its HTML with the open pixel and the links rewritten as it asked. */
export function trackedEmail(keys: TrackingKeys, messageId: string, email: Email): Email {
  if ((!email.trackOpens && !email.trackClicks) || email.html === "") return email;
  const { html } = applyTracking(email.html, {
    publicUrl: keys.publicUrl,
    messageId,
    key: keys.key,
    opens: email.trackOpens,
    clicks: email.trackClicks,
    unsubscribeUrls: unsubscribeTargets(email),
  });
  email.html = html;
  return email;
}

export interface TrackingDeps {
  records: Pick<Records, "history" | "tracking">;
  clock: Clock;
  key: Uint8Array;
}

/** TrackingService's methods, by name. */
export function trackingHandlers(deps: TrackingDeps): ServiceImpl<typeof TrackingService> {
  return { recordHit: (req) => recordHit(deps, req) };
}

export async function recordHit(deps: TrackingDeps, req: RecordHitRequest) {
  const target = readToken(req.token, [deps.key]);
  if (!target) return { valid: false };
  const atMs = deps.clock.nowMs();
  const url = target.kind === "click" ? target.url : "";
  return guard(async () => {
    const owner = await deps.records.history.recipientOf(target.messageId);
    // A message whose records are gone (past the retention) still redirects; nothing is counted.
    if (!owner) return { valid: true, url, machine: false, reason: "unknown message" };
    const link = target.kind === "click" ? target.link : -1;
    const otherClicks =
      target.kind === "click" ? await deps.records.tracking.clicksSince(target.messageId, atMs - BURST_WINDOW_MS) : [];
    const verdict = classifyHit({
      kind: target.kind,
      atMs,
      userAgent: req.userAgent,
      ip: req.ip,
      method: req.method,
      msSinceDelivery: owner.deliveredMs === undefined ? undefined : atMs - owner.deliveredMs,
      link: target.kind === "click" ? link : undefined,
      otherClicks,
    });
    await deps.records.tracking.record({
      orgId: owner.orgId,
      messageId: target.messageId,
      kind: target.kind,
      link,
      url: url || undefined,
      atMs,
      ...verdict,
    });
    return { valid: true, url, ...verdict };
  });
}
