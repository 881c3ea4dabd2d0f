import { MAX_EMAIL, MAX_LOCAL_PART } from "../subscribers";
import { apiOperation, errorAnswer, idempotentCreate, jsonAnswer, rateLimitHeaders, schemaRef } from "./common";
import { SUBSCRIBER_ADDRESS, TAG_NAME_PATTERN, WHITE_SPACE } from "./patterns";
import type { ApiArea, Schema } from "./types";

export const TAG_NAME = {
  type: "string",
  pattern: TAG_NAME_PATTERN,
  format: "tag-name",
  description:
    "1 to 64 letters and digits of any script (Unicode categories L and N), spaces, `_` and `-` (format `tag-name`; the pattern admits any character beyond ASCII).",
};
const STATUS = { type: "string", enum: ["subscribed", "unsubscribed"] };
const EVENT_TYPES = [
  "subscriber.created",
  "subscriber.updated",
  "subscriber.unsubscribed",
  "subscriber.resubscribed",
  "tag.added",
  "tag.removed",
  "email.queued",
  "email.delivered",
  "email.bounced",
  "email.complained",
  "workflow.started",
  "workflow.completed",
];

const subscriberRef = {
  name: "id",
  in: "path",
  required: true,
  description: "The subscriber's id, or its email as it is or percent-encoded (compared trimmed and lower-cased).",
  schema: { type: "string" },
  example: "sub_5f1d2c3b4a5968778695a4b3",
};
export const paging = [
  {
    name: "limit",
    in: "query",
    required: false,
    description: "Items per page.",
    schema: { type: "integer", minimum: 1, maximum: 100, default: 20 },
    example: 20,
  },
  {
    name: "cursor",
    in: "query",
    required: false,
    description:
      "The `nextCursor` of the page before (opaque). A string of its form that the API did not give is refused (422, `field` `cursor`).",
    schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,200}$" },
    example: "c3ViXzVmMWQyYzNi",
  },
];

export const body = (name: string) => ({
  required: true,
  content: { "application/json": { schema: schemaRef(name) } },
});
export const invalid = jsonAnswer("A field is invalid; `field` names it.", schemaRef("ValidationFailed"));
const notFound = errorAnswer("No such subscriber in this organization.", ["NOT_FOUND"]);
export const unreadable = {
  "400": errorAnswer("The body is not JSON.", ["INVALID_JSON"]),
  "413": errorAnswer("The body is larger than 1 MB.", ["PAYLOAD_TOO_LARGE"]),
  "415": errorAnswer("The body is not sent as application/json.", ["UNSUPPORTED_MEDIA_TYPE"]),
};
const subscriber = (description: string) => jsonAnswer(description, schemaRef("Subscriber"));
export const list = (item: Schema) => ({
  type: "object",
  required: ["data", "nextCursor"],
  properties: {
    data: { type: "array", items: item },
    nextCursor: { type: ["string", "null"], description: "The next page's cursor; null on the last page." },
  },
});
export const noContent = (description: string) => ({ description, headers: rateLimitHeaders });

/** The upsert's parts and switches, without the email (PATCH) or with it (POST). */
const changeProperties = {
  name: { type: "string", maxLength: 256, pattern: "^[^\\r\\n]*$", description: "One line." },
  fields: {
    type: "object",
    maxProperties: 50,
    propertyNames: { pattern: "^[A-Za-z0-9_-]{1,64}$" },
    additionalProperties: { type: ["string", "number", "boolean", "null"], maxLength: 4096 },
    description:
      "Merged into the subscriber's fields; flat: string (up to 4096 characters), number, boolean or null values.",
  },
  tags: { type: "array", maxItems: 100, items: TAG_NAME, description: "Added (created in the organization when new)." },
  status: { ...STATUS, description: "`subscribed` when created without it." },
  replaceTags: { type: "boolean", default: false, description: "The subscriber's tags become exactly `tags`." },
  resubscribe: {
    type: "boolean",
    default: false,
    description: "Without it, an unsubscribed subscriber stays unsubscribed.",
  },
  triggerWorkflows: {
    type: "boolean",
    default: true,
    description:
      "False records the change and its events but starts no workflow (for webhook handlers, so that an update does not cascade into more API calls).",
  },
};

/** An address as the subscriber and suppression endpoints take it (the API's subscriberEmail), and what becomes of it. */
export function subscriberEmailSchema(kept: string) {
  return {
    type: "string",
    maxLength: MAX_EMAIL,
    pattern: `^[${WHITE_SPACE}]*${SUBSCRIBER_ADDRESS}[${WHITE_SPACE}]*$`,
    // The local part's limit, a second pattern the value must match too.
    allOf: [{ pattern: `^[${WHITE_SPACE}]*[^@]{1,${MAX_LOCAL_PART}}@` }],
    format: "subscriber-email",
    description: `One bare address (no display name; a dot-atom local part of at most ${MAX_LOCAL_PART} characters at a host of two labels or more; UTF-8 allowed: letters, digits and marks of any script, format \`subscriber-email\`), ${kept}.`,
  };
}

export const audienceArea: ApiArea = {
  tag: { name: "Subscribers", description: "The organization's subscribers, one per email: fields, tags and events." },
  paths: {
    "/api/v1/subscribers": {
      get: apiOperation({
        operationId: "listSubscribers",
        summary: "List subscribers",
        description: "Newest first. A walk by cursor neither skips nor repeats a subscriber while others are added.",
        tags: ["Subscribers"],
        parameters: [
          ...paging,
          {
            name: "tag",
            in: "query",
            required: false,
            description: "Only subscribers with this tag.",
            schema: TAG_NAME,
          },
          {
            name: "status",
            in: "query",
            required: false,
            description: "Only subscribers with this status.",
            schema: STATUS,
          },
          {
            name: "email",
            in: "query",
            required: false,
            description: "Only subscribers whose email starts with this.",
            schema: { type: "string" },
          },
        ],
        responses: { "200": jsonAnswer("A page of subscribers.", list(schemaRef("Subscriber"))), "422": invalid },
      }),
      post: apiOperation(
        idempotentCreate({
          operationId: "upsertSubscriber",
          summary: "Create or update a subscriber",
          description:
            "An upsert by email. A repeated identical upsert changes nothing, records no event and starts nothing; concurrent upserts of one email make one subscriber.",
          tags: ["Subscribers"],
          requestBody: body("SubscriberUpsert"),
          responses: {
            "200": subscriber("Updated (or unchanged)."),
            "201": subscriber("Created."),
            "422": invalid,
            ...unreadable,
          },
        }),
      ),
    },
    "/api/v1/subscribers/batch": {
      post: apiOperation(
        idempotentCreate({
          operationId: "upsertSubscribers",
          summary: "Create or update up to 1000 subscribers",
          description:
            "One request against the quota. One result per item, in input order; an invalid item fails alone. With `triggerWorkflows: false`, the way to import a list.",
          tags: ["Subscribers"],
          requestBody: body("SubscriberBatch"),
          responses: {
            "200": jsonAnswer("One result per item, in order.", schemaRef("SubscriberBatchResults")),
            "422": invalid,
            ...unreadable,
          },
        }),
      ),
    },
    "/api/v1/subscribers/{id}": {
      get: apiOperation({
        operationId: "getSubscriber",
        summary: "Read a subscriber",
        tags: ["Subscribers"],
        parameters: [subscriberRef],
        responses: { "200": subscriber("The subscriber."), "404": notFound },
      }),
      patch: apiOperation({
        operationId: "updateSubscriber",
        summary: "Update a subscriber",
        description: "The upsert's parts and switches; what is left out stays as it is. The email cannot be changed.",
        tags: ["Subscribers"],
        parameters: [subscriberRef],
        requestBody: body("SubscriberPatch"),
        responses: { "200": subscriber("The subscriber."), "404": notFound, "422": invalid, ...unreadable },
      }),
      delete: apiOperation({
        operationId: "deleteSubscriber",
        summary: "Delete a subscriber",
        description: "With its tags and events.",
        tags: ["Subscribers"],
        parameters: [subscriberRef],
        responses: { "204": noContent("Deleted."), "404": notFound },
      }),
    },
    "/api/v1/subscribers/{id}/tags": {
      post: apiOperation({
        operationId: "addSubscriberTags",
        summary: "Add tags to a subscriber",
        tags: ["Subscribers"],
        parameters: [subscriberRef],
        requestBody: body("SubscriberTags"),
        responses: { "200": subscriber("The subscriber."), "404": notFound, "422": invalid, ...unreadable },
      }),
      delete: apiOperation({
        operationId: "removeSubscriberTags",
        summary: "Remove tags from a subscriber",
        tags: ["Subscribers"],
        parameters: [subscriberRef],
        requestBody: body("SubscriberTags"),
        responses: { "200": subscriber("The subscriber."), "404": notFound, "422": invalid, ...unreadable },
      }),
    },
    "/api/v1/subscribers/{id}/events": {
      get: apiOperation({
        operationId: "listSubscriberEvents",
        summary: "List a subscriber's events",
        description: "Newest first: every change of the subscriber and every message sent to its address.",
        tags: ["Subscribers"],
        parameters: [subscriberRef, ...paging],
        responses: {
          "200": jsonAnswer("A page of events.", list(schemaRef("SubscriberEvent"))),
          "404": notFound,
          "422": invalid,
        },
      }),
    },
  },
  schemas: {
    Subscriber: {
      type: "object",
      required: ["id", "email", "name", "status", "fields", "tags", "createdAt", "updatedAt"],
      properties: {
        id: { type: "string", pattern: "^sub_[0-9a-f]{24}$" },
        // Not format email: that is ASCII alone, and an upsert admits UTF-8.
        email: {
          type: "string",
          pattern: `^${SUBSCRIBER_ADDRESS}$`,
          description:
            "As upserted, trimmed and lower-cased (UTF-8 allowed: letters, digits and marks of any script; the pattern admits any character beyond ASCII).",
        },
        name: { type: "string" },
        status: STATUS,
        fields: { type: "object", additionalProperties: { type: ["string", "number", "boolean", "null"] } },
        tags: { type: "array", items: { type: "string" } },
        createdAt: { type: "string", format: "date-time" },
        updatedAt: { type: "string", format: "date-time" },
      },
    },
    SubscriberUpsert: {
      type: "object",
      required: ["email"],
      description: "Unknown fields are refused (422).",
      properties: {
        email: subscriberEmailSchema("trimmed and lower-cased"),
        ...changeProperties,
      },
      additionalProperties: false,
    },
    SubscriberPatch: { type: "object", properties: changeProperties, additionalProperties: false },
    SubscriberBatch: {
      type: "object",
      required: ["subscribers"],
      properties: {
        subscribers: {
          type: "array",
          minItems: 1,
          maxItems: 1000,
          // An item is checked alone: one that is not a SubscriberUpsert fails alone, in its result.
          items: {
            description:
              "A SubscriberUpsert. An item that is not one does not refuse the batch: its result is `error`, naming the field (`subscribers[1].email`).",
          },
        },
        triggerWorkflows: { type: "boolean", default: true, description: "For every item that does not say." },
      },
      additionalProperties: false,
    },
    SubscriberBatchResults: {
      type: "object",
      required: ["data"],
      properties: {
        data: {
          type: "array",
          items: schemaRef("SubscriberBatchResult"),
        },
      },
    },
    SubscriberBatchResult: {
      type: "object",
      description: "What became of one item of a batch.",
      required: ["email", "result", "id", "error"],
      properties: {
        email: { type: ["string", "null"] },
        result: { type: "string", enum: ["created", "updated", "unchanged", "error"] },
        id: { type: ["string", "null"] },
        error: { type: ["string", "null"], description: "Why the item was refused." },
        field: { type: "string", description: "On an error: the invalid field, e.g. `subscribers[3].email`." },
      },
    },
    SubscriberTags: {
      type: "object",
      required: ["tags"],
      properties: {
        tags: { type: "array", maxItems: 100, items: TAG_NAME },
        triggerWorkflows: changeProperties.triggerWorkflows,
      },
      additionalProperties: false,
    },
    SubscriberEvent: {
      type: "object",
      required: ["type", "at", "data", "triggerWorkflows"],
      properties: {
        type: { type: "string", enum: EVENT_TYPES },
        at: { type: "string", format: "date-time" },
        data: { type: "object" },
        triggerWorkflows: { type: "boolean", description: "Whether the change may start workflows." },
      },
    },
  },
};
