import { InvalidField } from "../api/invalid_field";
import { DEFAULT_LIMIT } from "../api/resource";
import { MAX_EMAIL, tagName } from "../api/subscribers";
import { isSuppressionReason } from "../mail/suppression";
import {
  campaignsPage,
  subscriberPage,
  subscribersPage,
  suppressionsPage,
  workflowPage,
  workflowsPage,
} from "./audience_pages";
import type { ConsoleContext } from "./context";
import { type PageRequest, page, pathParam } from "./request";
import { reading, signedIn } from "./session";
import { ticketed } from "../api/respond";

// The audience and what is sent to it: subscribers and their events, campaigns, workflows and
// their runs. Read only; the records are asked for the session's organization.

/** One page of a list, as long as the API's default page: the cursor of the link that asked for it. */
export const paging = (r: PageRequest) => ({ limit: DEFAULT_LIMIT, cursor: r.url.searchParams.get("cursor") ?? "" });

/** What is wrong with the subscribers' filters, as the API says it; undefined when nothing is. */
export function filterRefusal(emailPrefix: string, tag: string): string | undefined {
  // A prefix longer than an address can be is a mistake.
  if (emailPrefix.length > MAX_EMAIL)
    return `The email prefix is longer than an address can be (${MAX_EMAIL} characters).`;
  if (tag === "") return undefined;
  try {
    tagName("tag", tag);
    return undefined;
  } catch (err) {
    if (err instanceof InvalidField) return `${err.message}.`;
    throw err;
  }
}

/** GET /console/subscribers: filtered by email prefix and tag; a filter the API would refuse is the page saying why (422). */
export function showSubscribers(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  const filter = { email: r.url.searchParams.get("email") ?? "", tag: r.url.searchParams.get("tag") ?? "" };
  const [email, tag] = [filter.email.trim(), filter.tag.trim()];
  const refused = filterRefusal(email, tag);
  if (refused)
    return signedIn(cx, r, async (s) =>
      page(
        422,
        subscribersPage({
          session: s,
          subscribers: [],
          filter,
          paged: { cursor: "", nextCursor: "" },
          notice: { kind: "error", text: refused },
        }),
      ),
    );
  return reading(cx, r, async (s) => {
    const p = paging(r);
    const res = await cx.ports.audience.listSubscribers({ ...p, emailPrefix: email, tag }, ticketed(cx.slow, s.ticket));
    return subscribersPage({
      session: s,
      subscribers: res.subscribers,
      filter,
      paged: { cursor: p.cursor, nextCursor: res.nextCursor },
    });
  });
}

/** GET /console/subscribers/{id}: a subscriber and a page of its events. */
export function showSubscriber(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return reading(cx, r, async (s) => {
    const ref = { ref: pathParam(id!) };
    const p = paging(r);
    const [{ subscriber }, res] = await Promise.all([
      cx.ports.audience.getSubscriber(ref, ticketed(cx.slow, s.ticket)),
      cx.ports.audience.listSubscriberEvents({ ...ref, ...p }, ticketed(cx.slow, s.ticket)),
    ]);
    return subscriberPage({
      session: s,
      subscriber: subscriber!,
      events: res.events,
      paged: { cursor: p.cursor, nextCursor: res.nextCursor },
    });
  });
}

/** GET /console/campaigns. */
export function showCampaigns(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return reading(cx, r, async (s) => {
    const p = paging(r);
    const res = await cx.ports.automation.listCampaigns(p, ticketed(cx.slow, s.ticket));
    return campaignsPage({
      session: s,
      campaigns: res.campaigns,
      paged: { cursor: p.cursor, nextCursor: res.nextCursor },
    });
  });
}

/** GET /console/suppressions: the suppression list, of one reason or all; a reason that is none is the page saying so (422). */
export function showSuppressions(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  const reason = r.url.searchParams.get("reason") ?? "";
  if (reason !== "" && !isSuppressionReason(reason))
    return signedIn(cx, r, async (s) =>
      page(
        422,
        suppressionsPage({
          session: s,
          suppressions: [],
          reason: "",
          paged: { cursor: "", nextCursor: "" },
          notice: { kind: "error", text: `There is no reason “${reason}”.` },
        }),
      ),
    );
  return reading(cx, r, async (s) => {
    const p = paging(r);
    const res = await cx.ports.suppressions.listSuppressions({ ...p, reason }, ticketed(cx.slow, s.ticket));
    return suppressionsPage({
      session: s,
      suppressions: res.suppressions,
      reason,
      paged: { cursor: p.cursor, nextCursor: res.nextCursor },
    });
  });
}

/** GET /console/workflows. */
export function showWorkflows(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return reading(cx, r, async (s) => {
    const p = paging(r);
    const res = await cx.ports.automation.listWorkflows(p, ticketed(cx.slow, s.ticket));
    return workflowsPage({
      session: s,
      workflows: res.workflows,
      paged: { cursor: p.cursor, nextCursor: res.nextCursor },
    });
  });
}

/** GET /console/workflows/{id}: a workflow and a page of its runs. */
export function showWorkflow(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return reading(cx, r, async (s) => {
    const workflowId = pathParam(id!);
    const p = paging(r);
    const [{ workflow }, res] = await Promise.all([
      cx.ports.automation.getWorkflow({ id: workflowId }, ticketed(cx.slow, s.ticket)),
      cx.ports.automation.listWorkflowRuns({ workflowId, ...p }, ticketed(cx.slow, s.ticket)),
    ]);
    return workflowPage({
      session: s,
      workflow: workflow!,
      runs: res.runs,
      paged: { cursor: p.cursor, nextCursor: res.nextCursor },
    });
  });
}
