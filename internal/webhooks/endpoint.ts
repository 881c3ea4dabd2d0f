import { isWebhookEvent } from "./events";

// What a webhook endpoint may be: checked by the API (a 422 naming the field) and again by the
// daemon (INVALID_ARGUMENT), with this one function.

export const MAX_URL_LENGTH = 2_048;

/**
 * The most webhooks one organization may have: each event goes to every endpoint that
 * subscribed to it, and each attempt takes a worker's slot.
 */
export const MAX_WEBHOOKS_PER_ORG = 20;

export interface EndpointInput {
  url: string;
  events: string[];
}

export interface EndpointProblem {
  field: string;
  message: string;
}

/** The endpoint a request body asks for, or the first problem with it. */
export function checkEndpoint(body: unknown): EndpointInput | EndpointProblem {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return { field: "body", message: "The body must be a JSON object." };
  const { url, events, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined)
    return { field: unknown, message: `Unknown field ${unknown}: a webhook has url and events.` };
  if (
    typeof url !== "string" ||
    url.length > MAX_URL_LENGTH ||
    !URL.canParse(url) ||
    !/^https?:$/.test(new URL(url).protocol)
  ) {
    return {
      field: "url",
      message: `url must be an absolute http or https URL of at most ${MAX_URL_LENGTH} characters.`,
    };
  }
  if (!Array.isArray(events) || events.length === 0)
    return { field: "events", message: "events must be a non-empty list of event types." };
  const bad = events.findIndex((e) => !isWebhookEvent(e));
  if (bad >= 0) return { field: `events[${bad}]`, message: `${JSON.stringify(events[bad])} is not an event type.` };
  return { url, events: [...new Set(events as string[])] };
}
