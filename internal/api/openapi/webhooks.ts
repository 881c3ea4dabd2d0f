import { MAX_WEBHOOKS_PER_ORG } from "../../webhooks/endpoint";
import { TEST_EVENT, WEBHOOK_EVENTS } from "../../webhooks/events";
import { ATTEMPT_TIMEOUT_MS, RETRY_SCHEDULE_MS } from "../../webhooks/schedule";
import { apiOperation, errorAnswer, idempotentCreate, jsonAnswer, rateLimitHeaders, schemaRef } from "./common";
import { list, paging } from "./audience";
import type { ApiArea } from "./types";

const idParam = {
  name: "id",
  in: "path",
  required: true,
  description: "The webhook's id.",
  schema: { type: "string", pattern: "^wh_[0-9a-f]{24}$" },
  example: "wh_5f1d2c3b4a5968778695a4b3",
};

const deliveryIdParam = {
  name: "deliveryId",
  in: "path",
  required: true,
  description: "The delivery's id (its `webhook-id` header).",
  schema: { type: "string", pattern: "^whd_[0-9a-f]{24}$" },
  example: "whd_0a1b2c3d4e5f60718293a4b5",
};

const pageInvalid = jsonAnswer("`limit` or `cursor` is invalid; `field` names it.", schemaRef("ValidationFailed"));
const idInvalid = jsonAnswer("The id is not a webhook's id; `field` names it.", schemaRef("ValidationFailed"));
const notFound = errorAnswer("No such webhook in this organization.", ["NOT_FOUND"]);
const nullableTime = { type: ["string", "null"], format: "date-time" };

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
const PORT = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})";
const SCHEME = "^[hH][tT][tT][pP][sS]?://";

/**
 * An http or https URL that WHATWG URL parsing (what the API and the workers use) takes: a host
 * name of ASCII labels whose last starts with a letter (a numeric last label is parsed as an
 * IPv4 address, and fails when it is not one), or an IPv4 address; an optional port up to 65535.
 * No user info, no IPv6 literal, no punycode (xn--) label (the `not`): those are refused rather
 * than checked.
 */
export const HTTP_URL = {
  type: "string",
  format: "uri",
  maxLength: 2048,
  pattern: `${SCHEME}(${OCTET}(\\.${OCTET}){3}|([A-Za-z0-9_-]+\\.)*[A-Za-z][A-Za-z0-9_-]*\\.?)(:${PORT})?([/?#]|$)`,
  not: { pattern: `${SCHEME}([A-Za-z0-9_-]+\\.)*[xX][nN]--` },
  description:
    "An absolute http or https URL, at most 2048 characters, to a host name (ASCII letters, digits, `-` and `_`; the last label starting with a letter; no `xn--` label) or an IPv4 address, with an optional port; no user info.",
  example: "https://hooks.acme.example/mail",
};

/** A signing secret, as the create answers (and a workflow's rotation) show it once. */
export const webhookSecret = { type: "string", pattern: "^whsec_[A-Za-z0-9+/]+={0,2}$" };

/** The retry schedule in words, for the descriptions. */
export const retries = RETRY_SCHEDULE_MS.map((ms) =>
  ms < 60_000 ? `${ms / 1_000} s` : ms < 3_600_000 ? `${ms / 60_000} min` : `${ms / 3_600_000} h`,
).join(", ");

export const webhooksArea: ApiArea = {
  tag: {
    name: "Webhooks",
    description: `Signed event notifications (Standard Webhooks). Every attempt is a POST of \`{"type","timestamp","data"}\` with the headers \`webhook-id\` (the same on retries), \`webhook-timestamp\` (Unix seconds) and \`webhook-signature\` (\`v1,\` and the base64 HMAC-SHA256 of \`{id}.{timestamp}.{body}\`, keyed by the base64-decoded part of the secret after \`whsec_\`). A 2xx within ${ATTEMPT_TIMEOUT_MS / 1_000} s is a success; otherwise the delivery is retried after ${retries} (each ±10%), then failed. An endpoint whose attempts all fail for 5 days is disabled. A workflow's webhook steps are signed and retried the same way, with the workflow's own secret (see Workflows).`,
  },
  paths: {
    "/api/v1/webhooks": {
      post: apiOperation(
        idempotentCreate(
          {
            operationId: "createWebhook",
            summary: "Create a webhook",
            description:
              "Registers an endpoint for the given event types. The answer holds the signing secret, shown this once.",
            tags: ["Webhooks"],
            requestBody: {
              required: true,
              content: { "application/json": { schema: schemaRef("CreateWebhookRequest") } },
            },
            responses: {
              "201": jsonAnswer("Created; keep the secret.", schemaRef("WebhookCreated")),
              "400": errorAnswer("The body is not JSON.", ["INVALID_JSON"]),
              "413": errorAnswer("The body is larger than 1 MB.", ["PAYLOAD_TOO_LARGE"]),
              "415": errorAnswer("The body is not sent as application/json.", ["UNSUPPORTED_MEDIA_TYPE"]),
              "422": jsonAnswer(
                "A field is invalid; `field` names it (`url`, `events`, `events[2]`, ...).",
                schemaRef("ValidationFailed"),
              ),
            },
          },
          {
            code: "TOO_MANY_WEBHOOKS",
            when: `the organization has ${MAX_WEBHOOKS_PER_ORG} webhooks, the most it may (delete one first)`,
          },
        ),
      ),
      get: apiOperation({
        operationId: "listWebhooks",
        summary: "List webhooks",
        description: "The organization's webhooks, newest first, a page at a time. A disabled webhook says so.",
        tags: ["Webhooks"],
        parameters: paging,
        responses: {
          "200": jsonAnswer("A page of webhooks.", list(schemaRef("Webhook"))),
          "422": pageInvalid,
        },
      }),
    },
    "/api/v1/webhooks/{id}": {
      delete: apiOperation({
        operationId: "deleteWebhook",
        summary: "Delete a webhook",
        description: "Deletes the webhook with its deliveries; nothing more is sent to it.",
        tags: ["Webhooks"],
        parameters: [idParam],
        responses: {
          "204": { description: "Deleted.", headers: rateLimitHeaders },
          "404": notFound,
          "422": idInvalid,
        },
      }),
    },
    "/api/v1/webhooks/{id}/deliveries": {
      get: apiOperation({
        operationId: "listWebhookDeliveries",
        summary: "List a webhook's deliveries",
        description:
          "The webhook's deliveries, newest first, each with its attempts (time, duration, status code or error) and state.",
        tags: ["Webhooks"],
        parameters: [idParam, ...paging],
        responses: {
          "200": jsonAnswer("A page of deliveries.", list(schemaRef("WebhookDelivery"))),
          "404": notFound,
          "422": jsonAnswer("`id`, `limit` or `cursor` is invalid; `field` names it.", schemaRef("ValidationFailed")),
        },
      }),
    },
    "/api/v1/webhooks/{id}/test": {
      post: apiOperation(
        idempotentCreate({
          operationId: "testWebhook",
          summary: "Send a test event",
          description: `Queues a \`${TEST_EVENT}\` event (\`data\`: \`{"webhookId"}\`) to the webhook now, whatever event types it subscribed to, and even when it is disabled, so that a fixed receiver can be checked. It is signed, attempted and retried as every delivery; its attempts show in the webhook's deliveries and its health. No body.`,
          tags: ["Webhooks"],
          parameters: [idParam],
          responses: {
            "202": jsonAnswer("Queued: the delivery, due now.", schemaRef("WebhookDelivery")),
            "404": notFound,
            "422": idInvalid,
          },
        }),
      ),
    },
    "/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry": {
      post: apiOperation({
        operationId: "retryWebhookDelivery",
        summary: "Retry a delivery",
        description:
          "A new attempt of a delivered or failed delivery (a replay): it is pending again, its next attempt due now and numbered after its last, with the same `webhook-id` and body (the signature's timestamp is the attempt's). Should it fail, the retry schedule goes on from its attempt count. No body.",
        tags: ["Webhooks"],
        parameters: [idParam, deliveryIdParam],
        responses: {
          "202": jsonAnswer("Pending again: the delivery, with its attempts so far.", schemaRef("WebhookDelivery")),
          "404": errorAnswer("No such webhook, or no such delivery of it, in this organization.", ["NOT_FOUND"]),
          "409": errorAnswer("The delivery is still pending: its next attempt is already scheduled.", [
            "DELIVERY_PENDING",
          ]),
          "422": jsonAnswer("`id` or `deliveryId` is invalid; `field` names it.", schemaRef("ValidationFailed")),
        },
      }),
    },
  },
  schemas: {
    CreateWebhookRequest: {
      type: "object",
      required: ["url", "events"],
      properties: {
        url: HTTP_URL,
        events: { type: "array", minItems: 1, items: { type: "string", enum: [...WEBHOOK_EVENTS] } },
      },
      additionalProperties: false,
    },
    Webhook: {
      type: "object",
      required: [
        "id",
        "url",
        "events",
        "createdAt",
        "disabled",
        "disabledAt",
        "disabledReason",
        "lastSuccessAt",
        "lastFailureAt",
        "consecutiveFailures",
      ],
      properties: {
        id: { type: "string", pattern: "^wh_[0-9a-f]{24}$" },
        url: { type: "string", format: "uri" },
        events: { type: "array", items: { type: "string", enum: [...WEBHOOK_EVENTS] } },
        createdAt: { type: "string", format: "date-time" },
        disabled: { type: "boolean", description: "True once every attempt failed for 5 days; nothing more is sent." },
        disabledAt: nullableTime,
        disabledReason: { type: ["string", "null"] },
        lastSuccessAt: { ...nullableTime, description: "When an attempt last got a 2xx; null: never." },
        lastFailureAt: { ...nullableTime, description: "When an attempt last failed; null: never." },
        consecutiveFailures: {
          type: "integer",
          minimum: 0,
          description: "Attempts failed since the last success: its health at a glance.",
        },
      },
    },
    WebhookCreated: {
      allOf: [schemaRef("Webhook")],
      required: ["secret"],
      properties: { secret: webhookSecret },
      description: "A webhook as its create answers it: with its signing secret, shown this once.",
    },
    WebhookDelivery: {
      type: "object",
      required: ["id", "type", "state", "createdAt", "nextAttemptAt", "attempts"],
      properties: {
        id: { type: "string", description: "Also the `webhook-id` header of every attempt." },
        type: { type: "string", enum: [...WEBHOOK_EVENTS, TEST_EVENT] },
        state: { type: "string", enum: ["pending", "delivered", "failed"] },
        createdAt: { type: "string", format: "date-time" },
        nextAttemptAt: { ...nullableTime, description: "When a pending delivery is tried next." },
        attempts: { type: "array", items: schemaRef("WebhookAttempt") },
      },
    },
    WebhookAttempt: {
      type: "object",
      description: "One try of a delivery.",
      required: ["attempt", "at", "durationMs", "statusCode", "error", "responseExcerpt"],
      properties: {
        attempt: { type: "integer", minimum: 1 },
        at: { type: "string", format: "date-time" },
        durationMs: { type: "integer", minimum: 0 },
        statusCode: {
          type: ["integer", "null"],
          description: "The receiver's HTTP status; null when it did not answer.",
        },
        error: {
          type: ["string", "null"],
          description: "Why there was no answer (timeout, connection refused).",
        },
        responseExcerpt: {
          type: "string",
          maxLength: 256,
          description:
            "The start of the receiver's answer body: its first 256 characters, decoded as UTF-8 (invalid bytes replaced), control characters other than newline and tab removed. Empty when it did not answer or answered no body.",
        },
      },
    },
  },
};
