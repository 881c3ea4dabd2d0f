import { deliveryFigures } from "./activity_pages";
import type { ConsoleContext } from "./context";
import { usagePage } from "./pages";
import { type PageRequest, page } from "./request";
import { signedIn } from "./session";
import { ticketed } from "../api/respond";

// The plan and its usage, with the delivery figures of the last 30 days.

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The hours the usage page's figures need: the last 30 days and this month, to the end of this hour. */
export function figuresRange(nowMs: number): { sinceMs: bigint; untilMs: bigint } {
  const now = new Date(nowMs);
  const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const dayStart = Math.floor(nowMs / DAY_MS) * DAY_MS;
  const since = Math.min(monthStart, dayStart - 29 * DAY_MS);
  return { sinceMs: BigInt(since), untilMs: BigInt(Math.floor(nowMs / HOUR_MS) * HOUR_MS + HOUR_MS) };
}

/** GET /console/usage. */
export function showUsage(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return signedIn(cx, r, async (s, token) => {
    const nowMs = Date.now();
    const [usage, stats] = await Promise.all([
      cx.ports.console.getUsage({ sessionToken: token }, cx.call),
      cx.ports.mail.getMessageStats(figuresRange(nowMs), ticketed(cx.call, s.ticket)),
    ]);
    return page(200, usagePage({ session: s, usage, figures: deliveryFigures(stats.hours, nowMs) }));
  });
}
