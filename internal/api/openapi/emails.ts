import { apiOperation, errorAnswer, jsonAnswer, rateLimitHeaders, schemaRef } from "./common";
import { EXTRA_HEADERS, MAILBOX, MESSAGE_PARTS, SUBJECT } from "./message";
import type { ApiArea } from "./types";

const STATUSES = ["queued", "sending", "delivered", "deferred", "bounced", "failed"];
const LANES = ["transactional", "bulk"];

export const emailsArea: ApiArea = {
  tag: { name: "Emails", description: "Transactional email: send one message, read its status." },
  paths: {
    "/api/v1/emails": {
      post: apiOperation({
        operationId: "sendEmail",
        summary: "Send an email",
        description:
          "Queues one message in its lane once it is durably stored. The From domain must be a verified sending domain of the token's organization. Transactional sends are subject to the recipient guards: at most 5 accepted sends per mailbox in any 10 minutes and 20 in any 24 hours, and none while the mailbox is on bounce cooldown.",
        tags: ["Emails"],
        parameters: [
          {
            name: "Idempotency-Key",
            in: "header",
            required: false,
            description:
              "Kept 24 hours per organization: the same key with the same body answers the same 202 again and queues nothing; with another body, 409.",
            schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,255}$" },
          },
        ],
        requestBody: { required: true, content: { "application/json": { schema: schemaRef("SendEmailRequest") } } },
        responses: {
          "202": jsonAnswer("Queued.", schemaRef("Queued"), {
            "Idempotent-Replayed": {
              description: "`true` when this answers a repeated Idempotency-Key.",
              schema: { type: "string", enum: ["true"] },
            },
          }),
          "400": errorAnswer("The body is not JSON, or the Idempotency-Key is malformed.", [
            "INVALID_JSON",
            "INVALID_IDEMPOTENCY_KEY",
          ]),
          "403": errorAnswer("The From domain is not a verified sending domain of this organization.", [
            "DOMAIN_NOT_VERIFIED",
          ]),
          "409": errorAnswer("The Idempotency-Key was used with a different body.", ["IDEMPOTENCY_KEY_REUSED"]),
          "413": errorAnswer("The body is larger than 1 MB.", ["PAYLOAD_TOO_LARGE"]),
          "415": errorAnswer("The body is not sent as application/json.", ["UNSUPPORTED_MEDIA_TYPE"]),
          "422": jsonAnswer("A field is invalid; `field` names it.", schemaRef("ValidationFailed")),
          "429": {
            description:
              "Over the quota or the IP limit (`{message, docs}`), or a recipient guard (`{code: RECIPIENT_RATE_LIMITED, message}`). Honour Retry-After in both cases.",
            headers: { ...rateLimitHeaders, "Retry-After": { $ref: "#/components/headers/Retry-After" } },
            content: {
              "application/json": {
                schema: { oneOf: [schemaRef("TooManyRequests"), schemaRef("RecipientRateLimited")] },
              },
            },
          },
        },
      }),
    },
    "/api/v1/emails/{id}": {
      get: apiOperation({
        operationId: "getEmail",
        summary: "Read an email's status",
        description:
          "The message's status, attempts and events, for messages of the token's organization (kept MESSAGE_RETENTION_DAYS after they finish).",
        tags: ["Emails"],
        parameters: [
          {
            name: "id",
            in: "path",
            required: true,
            description: "The id a send answered.",
            schema: { type: "string", pattern: "^msg_[0-9a-f]{24}$" },
            example: "msg_5f1d2c3b4a5968778695a4b3",
          },
        ],
        responses: {
          "200": jsonAnswer("The message.", schemaRef("EmailStatus")),
          "404": errorAnswer("No such message in this organization.", ["NOT_FOUND"]),
          "422": jsonAnswer("The id is not an email's id; `field` names it.", schemaRef("ValidationFailed")),
        },
      }),
    },
  },
  schemas: {
    SendEmailRequest: {
      type: "object",
      required: ["from", "to", "subject"],
      description:
        "At least one of html, text or markdown, not empty; markdown not with html. Unknown fields are refused (422). Beyond its shape, a send is refused (422) when its Markdown renders to more than 2 MB of HTML or takes longer than API_VALIDATION_TIMEOUT_MS to check, and (403) when the From domain is not a verified sending domain.",
      properties: {
        from: {
          ...MAILBOX,
          description: "The sender; its domain must be a verified sending domain of the organization.",
        },
        to: {
          oneOf: [MAILBOX, { type: "array", items: MAILBOX, minItems: 1, maxItems: 1 }],
          description: "Exactly one recipient.",
        },
        subject: SUBJECT,
        html: { type: "string" },
        text: { type: "string" },
        markdown: { type: "string", description: "Rendered to HTML and kept as the text part; not with html." },
        replyTo: MAILBOX,
        headers: {
          ...EXTRA_HEADERS,
          description:
            "Extra one-line headers from an allow-list: X-* (but not X-Mailcore-*), List-*, In-Reply-To, References, Auto-Submitted, Precedence, Feedback-ID.",
        },
        tags: { type: "array", maxItems: 20, items: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" } },
        tracking: {
          type: "object",
          properties: { opens: { type: "boolean", default: false }, clicks: { type: "boolean", default: false } },
          additionalProperties: false,
        },
        lane: { type: "string", enum: LANES, default: "transactional" },
      },
      ...MESSAGE_PARTS,
      additionalProperties: false,
    },
    Queued: {
      type: "object",
      required: ["id", "status", "lane"],
      properties: {
        id: { type: "string", pattern: "^msg_[0-9a-f]{24}$" },
        status: { const: "queued" },
        lane: { type: "string", enum: LANES },
      },
    },
    ValidationFailed: {
      allOf: [schemaRef("Error")],
      required: ["field"],
      properties: {
        code: { const: "VALIDATION_FAILED" },
        field: { type: "string", description: "The invalid field, e.g. `to` or `headers.X-Foo`." },
      },
      examples: [{ code: "VALIDATION_FAILED", message: "to: must be one address", field: "to" }],
    },
    EmailStatus: {
      type: "object",
      required: ["id", "lane", "status", "from", "to", "subject", "attempts", "createdAt", "updatedAt", "events"],
      properties: {
        id: { type: "string" },
        lane: { type: "string", enum: LANES },
        status: { type: "string", enum: STATUSES },
        from: { type: "string" },
        to: { type: "string" },
        subject: { type: "string" },
        attempts: { type: "integer", minimum: 0 },
        createdAt: { type: "string", format: "date-time" },
        updatedAt: { type: "string", format: "date-time" },
        events: { type: "array", items: schemaRef("EmailEvent") },
      },
    },
    EmailEvent: {
      type: "object",
      description: "A change of a message's status.",
      required: ["status", "at", "detail"],
      properties: {
        status: { type: "string", enum: STATUSES },
        at: { type: "string", format: "date-time" },
        detail: { type: "string" },
      },
    },
  },
};
