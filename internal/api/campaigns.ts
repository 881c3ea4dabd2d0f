import { Code, ConnectError } from "@connectrpc/connect";
import { type Campaign, CampaignStatus } from "../gen/mailcore/limiter/v1/automation_pb";
import { InvalidField } from "./invalid_field";
import { parseMessageTemplate } from "./message_template";
import { type Admitted, error, type Handler, iso, json } from "./respond";
import { body, decoded, keyedCall, paging, route } from "./resource";
import { tagList } from "./subscribers";

// The campaign endpoints: draft, send (now or at scheduledAt), cancel, read with stats. Each
// validates here and makes one call to the daemon, which fans the campaign out.

/** A campaign's status as the API names it (the console shows the same words). */
export const CAMPAIGN_STATUS_NAMES: Record<number, string> = {
  [CampaignStatus.DRAFT]: "draft",
  [CampaignStatus.SCHEDULED]: "scheduled",
  [CampaignStatus.SENDING]: "sending",
  [CampaignStatus.SENT]: "sent",
  [CampaignStatus.CANCELLED]: "cancelled",
  [CampaignStatus.FAILED]: "failed",
};
const FIELDS = new Set(["name", "from", "subject", "html", "text", "markdown", "audience"]);
const MAX_NAME = 256;

function campaignJson(c: Campaign) {
  const s = c.stats!;
  return {
    id: c.id,
    name: c.name,
    from: c.from,
    subject: c.subject,
    html: c.html,
    text: c.text,
    audience: c.audienceTags.length > 0 ? { tags: c.audienceTags } : { all: true },
    status: CAMPAIGN_STATUS_NAMES[c.status],
    scheduledAt: c.scheduledAtMs > 0n ? iso(c.scheduledAtMs) : null,
    ...(c.detail ? { error: c.detail } : {}),
    stats: {
      recipients: Number(s.recipients),
      queued: Number(s.queued),
      delivered: Number(s.delivered),
      bounced: Number(s.bounced),
      failed: Number(s.failed),
      skipped: Number(s.skipped),
      suppressed: Number(s.suppressed),
    },
    createdAt: iso(c.createdAtMs),
    updatedAt: iso(c.updatedAtMs),
  };
}

/** A campaign's body: the message (checked as a send is) and its audience. Throws InvalidField. */
export function parseCampaign(b: unknown) {
  if (typeof b !== "object" || b === null || Array.isArray(b)) throw new InvalidField("body", "must be a JSON object");
  const o = b as Record<string, unknown>;
  const unknown = Object.keys(o).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");
  if (typeof o.name !== "string" || o.name.trim() === "" || o.name.length > MAX_NAME)
    throw new InvalidField("name", `is required: a string of at most ${MAX_NAME} characters`);
  const message = parseMessageTemplate(o);
  const a = o.audience;
  if (typeof a !== "object" || a === null || Array.isArray(a))
    throw new InvalidField("audience", 'is required: {"tags":[...]} or {"all":true}');
  const audience = a as Record<string, unknown>;
  let audienceTags: string[];
  if (audience.all === true && audience.tags === undefined) audienceTags = [];
  else if (audience.all === undefined && Array.isArray(audience.tags) && audience.tags.length > 0)
    audienceTags = tagList("audience.tags", audience.tags);
  else throw new InvalidField("audience", 'must be {"tags":[one or more tags]} or {"all":true}');
  return { name: o.name.trim(), ...message, audienceTags };
}

/** POST .../send: {"scheduledAt"?: an ISO 8601 time}; the time in ms, 0 for now. */
function parseSchedule(b: unknown): bigint {
  if (typeof b !== "object" || b === null || Array.isArray(b)) throw new InvalidField("body", "must be a JSON object");
  const o = b as Record<string, unknown>;
  const unknown = Object.keys(o).find((k) => k !== "scheduledAt");
  if (unknown !== undefined) throw new InvalidField(unknown, "is not a field of this endpoint");
  if (o.scheduledAt === undefined || o.scheduledAt === null) return 0n;
  const ms = typeof o.scheduledAt === "string" ? Date.parse(o.scheduledAt) : Number.NaN;
  if (!Number.isFinite(ms))
    throw new InvalidField("scheduledAt", "must be a date and time in ISO 8601 (2026-12-01T09:00:00Z)");
  return BigInt(ms);
}

/** The audience endpoints' answers, and 409 for a campaign in the wrong state. */
function campaignRoute(run: Handler): Handler {
  const inner = route(run);
  return async (front, a) => {
    try {
      return await inner(front, a);
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.FailedPrecondition)
        return error(409, "CAMPAIGN_STATE", `${err.rawMessage}.`, a.headers);
      throw err;
    }
  };
}

const campaignRef = (a: Admitted) => ({ id: decoded(a.params[0]!) });

/** GET /api/v1/campaigns: a page, newest first. */
export const listCampaigns = campaignRoute(async ({ ports, records }, { req, headers }) => {
  const res = await ports.automation.listCampaigns({ ...paging(new URL(req.url)) }, records);
  return json(200, { data: res.campaigns.map(campaignJson), nextCursor: res.nextCursor || null }, headers);
});

/** POST /api/v1/campaigns: a draft. */
export const createCampaign = campaignRoute(async (front, a) => {
  const { campaign } = await front.ports.automation.createCampaign(
    { ...parseCampaign(await body(a)) },
    keyedCall(front, a),
  );
  return json(201, campaignJson(campaign!), a.headers);
});

/** GET /api/v1/campaigns/{id}: with its stats. */
export const getCampaign = campaignRoute(async ({ ports, records }, a) =>
  json(200, campaignJson((await ports.automation.getCampaign(campaignRef(a), records)).campaign!), a.headers),
);

/** POST /api/v1/campaigns/{id}/send: now, or at scheduledAt. */
export const sendCampaign = campaignRoute(async (front, a) => {
  // No body is "send now": an empty one, or none at all (curl -X POST sends no Content-Length).
  const h = a.req.headers;
  const none = h.get("content-length") === "0" || (!h.has("content-length") && !h.has("transfer-encoding"));
  const b = none ? {} : await body(a);
  const { campaign } = await front.ports.automation.sendCampaign(
    { ...campaignRef(a), scheduledAtMs: parseSchedule(b) },
    front.records,
  );
  return json(202, campaignJson(campaign!), a.headers);
});

/** POST /api/v1/campaigns/{id}/cancel. */
export const cancelCampaign = campaignRoute(async ({ ports, records }, a) =>
  json(200, campaignJson((await ports.automation.cancelCampaign(campaignRef(a), records)).campaign!), a.headers),
);
