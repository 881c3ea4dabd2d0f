import { MAX_STATS_DAYS, MAX_STATS_HOURLY_DAYS } from "../activity";
import { list, paging } from "./audience";
import { apiOperation, errorAnswer, jsonAnswer, rateLimitHeaders, schemaRef } from "./common";
import { EXTRA_HEADERS, MAILBOX, MESSAGE_PARTS, SUBJECT } from "./message";
import { WHITE_SPACE } from "./patterns";
import type { ApiArea } from "./types";

const STATUSES = ["queued", "sending", "delivered", "deferred", "bounced", "failed"];
const LANES = ["transactional", "bulk"];
const TAG = { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" };
const time = (name: string, description: string, example: string) => ({
  name,
  in: "query",
  required: false,
  description,
  schema: { type: "string", format: "date-time" },
  example,
});

const COUNT = { type: "integer", minimum: 0 };
const HUMAN_MACHINE = {
  type: "object",
  required: ["human", "machine"],
  properties: { human: COUNT, machine: COUNT },
  additionalProperties: false,
};

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
          "403": errorAnswer(
            "The From domain is not a verified sending domain of this organization (`DOMAIN_NOT_VERIFIED`), or the organization's bulk sends are paused because its complaint rate went over 0.3% (`BULK_LANE_PAUSED`; transactional sends go on; an operator resumes them).",
            ["DOMAIN_NOT_VERIFIED", "BULK_LANE_PAUSED"],
          ),
          "409": errorAnswer("The Idempotency-Key was used with a different body.", ["IDEMPOTENCY_KEY_REUSED"]),
          "413": errorAnswer("The body is larger than 1 MB.", ["PAYLOAD_TOO_LARGE"]),
          "415": errorAnswer("The body is not sent as application/json.", ["UNSUPPORTED_MEDIA_TYPE"]),
          "422": {
            description:
              "A field is invalid (`field` names it), or the recipient is on the organization's suppression list (`{code: RECIPIENT_SUPPRESSED, message}`; nothing was queued, see Suppressions).",
            headers: rateLimitHeaders,
            content: {
              "application/json": {
                schema: { oneOf: [schemaRef("ValidationFailed"), schemaRef("RecipientSuppressed")] },
              },
            },
          },
          "429": {
            description:
              "Over the quota or the IP limit (`{message, docs}`), a recipient guard (`{code: RECIPIENT_RATE_LIMITED, message}`), or the organization's queue is full (`{code: QUEUE_FULL, message}`). Honour Retry-After in every case.",
            headers: { ...rateLimitHeaders, "Retry-After": { $ref: "#/components/headers/Retry-After" } },
            content: {
              "application/json": {
                schema: {
                  oneOf: [schemaRef("TooManyRequests"), schemaRef("RecipientRateLimited"), schemaRef("QueueFull")],
                },
              },
            },
          },
        },
      }),
      get: apiOperation({
        operationId: "listEmails",
        summary: "List emails",
        description:
          "The organization's messages, newest first, a page at a time (the activity log), narrowed by any of the filters together. A message shows here once the records have it (within a second of its acceptance), with its status as of then; `GET /api/v1/emails/{id}` has its events. Messages are kept MESSAGE_RETENTION_DAYS after they finish.",
        tags: ["Emails"],
        parameters: [
          ...paging,
          {
            name: "status",
            in: "query",
            required: false,
            description: "Only messages in this status now.",
            schema: { type: "string", enum: STATUSES },
          },
          {
            name: "to",
            in: "query",
            required: false,
            description:
              "Only messages to this mailbox, compared as the recipient guards compare them: case aside, and without a +tag (`Ada+news@Example.org` finds mail to `ada@example.org` and `ada+x@example.org`).",
            schema: { type: "string", pattern: `^[^@${WHITE_SPACE}]+@[^@${WHITE_SPACE}]+$`, maxLength: 254 },
            example: "ada@example.org",
          },
          { name: "tag", in: "query", required: false, description: "Only messages sent with this tag.", schema: TAG },
          {
            name: "lane",
            in: "query",
            required: false,
            description: "Only messages of this lane.",
            schema: { type: "string", enum: LANES },
          },
          time("after", "Only messages accepted at or after this time (RFC 3339).", "2026-11-25T00:00:00Z"),
          time("before", "Only messages accepted before this time (RFC 3339), after `after`.", "2026-11-26T00:00:00Z"),
        ],
        responses: {
          "200": jsonAnswer("A page of messages.", list(schemaRef("EmailListItem"))),
          "422": jsonAnswer(
            "A filter, `limit` or `cursor` is invalid, or `before` is not after `after`; `field` names it.",
            schemaRef("ValidationFailed"),
          ),
        },
      }),
    },
    "/api/v1/stats/emails": {
      get: apiOperation({
        operationId: "getEmailStats",
        summary: "Delivery figures over time",
        description: `Per hour or per UTC day, the organization's messages accepted, delivered, bounced, failed and deferred (each deferral counts), and its 429 refusals by kind: \`quota\` (over the organization's quota), \`ip\` (over the IP limit), \`recipient\` (a recipient guard). Kept as counters as the events are recorded, so a range reads as fast at any volume; a message event counts in the interval it happened in. Every interval from \`since\` to \`until\` is listed, oldest first, those without mail with zeros. \`since\` is rounded down and \`until\` up to whole intervals. Defaults: \`until\` now, and \`since\` such that the answer is the last 24 hours (hour) or 30 days (day), the current one included. A \`since\` later than now without \`until\` is a range that has not begun: 200 with no intervals (\`data\` empty, \`until\` equal to \`since\`). At most ${MAX_STATS_HOURLY_DAYS} days by hour, ${MAX_STATS_DAYS} by day.`,
        tags: ["Emails"],
        parameters: [
          time("since", "The start of the range (RFC 3339).", "2026-11-24T15:00:00Z"),
          time(
            "until",
            "The end of the range (RFC 3339), after `since`; by default now (or `since`, when that is later).",
            "2026-11-25T15:00:00Z",
          ),
          {
            name: "interval",
            in: "query",
            required: false,
            description: "The width of each row.",
            schema: { type: "string", enum: ["hour", "day"], default: "hour" },
          },
        ],
        responses: {
          "200": jsonAnswer("The counts per interval.", schemaRef("EmailStats")),
          "422": jsonAnswer(
            "`since`, `until` or `interval` is invalid, a given `until` is not after `since`, or the range is too long; `field` names it.",
            schemaRef("ValidationFailed"),
          ),
        },
      }),
    },
    "/api/v1/emails/{id}": {
      get: apiOperation({
        operationId: "getEmail",
        summary: "Read an email's status",
        description:
          "The message's status, attempts and events, and each try at a receiver (host, address, TLS, the reply), for messages of the token's organization (kept MESSAGE_RETENTION_DAYS after they finish).",
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
          description:
            "Off unless asked. `opens`: a 1x1 image at PUBLIC_URL/t/o/... is added to the HTML. `clicks`: every http(s) link but the unsubscribe one goes through PUBLIC_URL/t/c/... (signed: it redirects only to that link). Applied before the DKIM signature. Opens and clicks are counted by people and machines apart (GET /api/v1/stats/emails) and announced as email.opened and email.clicked.",
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
    EmailListItem: {
      type: "object",
      required: ["id", "status", "lane", "from", "to", "subject", "tags", "createdAt", "updatedAt"],
      properties: {
        id: { type: "string", pattern: "^msg_[0-9a-f]{24}$" },
        status: { type: "string", enum: STATUSES },
        lane: { type: "string", enum: LANES },
        from: { type: "string", description: "The From header as sent." },
        to: { type: "string", description: "The To header as sent." },
        subject: { type: "string" },
        tags: { type: "array", items: TAG },
        createdAt: { type: "string", format: "date-time", description: "When it was accepted." },
        updatedAt: { type: "string", format: "date-time", description: "When its status last changed." },
      },
    },
    EmailStats: {
      type: "object",
      required: ["interval", "since", "until", "complaintRate", "data"],
      properties: {
        interval: { type: "string", enum: ["hour", "day"] },
        complaintRate: {
          type: "number",
          minimum: 0,
          description:
            "Complaints per delivered message over the whole range (0 without deliveries). Mailbox providers block senders above 0.3%; keep it under 0.1%.",
        },
        since: { type: "string", format: "date-time", description: "The start of the first interval." },
        until: { type: "string", format: "date-time", description: "The end of the last interval." },
        data: {
          type: "array",
          items: {
            type: "object",
            required: [
              "start",
              "accepted",
              "delivered",
              "bounced",
              "failed",
              "deferred",
              "complained",
              "opened",
              "clicked",
              "refused",
            ],
            properties: {
              start: { type: "string", format: "date-time" },
              accepted: COUNT,
              delivered: COUNT,
              bounced: COUNT,
              failed: COUNT,
              deferred: COUNT,
              complained: { ...COUNT, description: "Complaints from feedback loops (ARF reports) received." },
              opened: {
                ...HUMAN_MACHINE,
                description:
                  "Opens of tracked messages (the pixel loaded): by a person, and likely by a machine (Apple Mail Privacy Protection, scanners, a load within 2 s of delivery: see docs/tracking.md).",
              },
              clicked: {
                ...HUMAN_MACHINE,
                description: "Clicks on tracked links: by a person, and likely by a machine (link scanners, bursts).",
              },
              refused: {
                type: "object",
                description: "429 answers given, by kind.",
                required: ["quota", "ip", "recipient"],
                properties: { quota: COUNT, ip: COUNT, recipient: COUNT },
              },
            },
          },
        },
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
      required: [
        "id",
        "lane",
        "status",
        "from",
        "to",
        "subject",
        "tags",
        "attempts",
        "createdAt",
        "updatedAt",
        "events",
        "deliveryAttempts",
      ],
      properties: {
        id: { type: "string" },
        lane: { type: "string", enum: LANES },
        status: { type: "string", enum: STATUSES },
        from: { type: "string" },
        to: { type: "string" },
        subject: { type: "string" },
        tags: { type: "array", items: TAG },
        attempts: { type: "integer", minimum: 0 },
        createdAt: { type: "string", format: "date-time" },
        updatedAt: { type: "string", format: "date-time" },
        events: { type: "array", items: schemaRef("EmailEvent") },
        deliveryAttempts: {
          type: "array",
          description:
            "Each try at a receiver, oldest first: the recipient's MX hosts (one delivery may try several), or the relay. Empty for the file sink and test fixtures.",
          items: schemaRef("DeliveryAttempt"),
        },
      },
    },
    EmailEvent: {
      type: "object",
      description:
        "A change of a message's status; `delayed` is a notice, not a status: the message was still not delivered 4 hours after its first attempt, and is still being tried.",
      required: ["status", "at", "detail"],
      properties: {
        status: { type: "string", enum: [...STATUSES, "delayed"] },
        at: { type: "string", format: "date-time" },
        detail: { type: "string" },
      },
    },
    DeliveryAttempt: {
      type: "object",
      description: "One try of a delivery at a receiver.",
      required: ["at", "host", "address", "tls", "stage", "reply", "enhancedCode"],
      properties: {
        at: { type: "string", format: "date-time" },
        host: {
          type: "string",
          description: 'The MX host (or relay); "" when the try reached none (no route, a destination suspended).',
        },
        address: { type: "string", description: 'The address connected to; "" when none was.' },
        tls: {
          type: "string",
          enum: ["none", "unverified", "verified", ""],
          description:
            "The channel: `none` (plaintext), `unverified` (TLS, the certificate not checked), `verified` (TLS to a certificate valid for the host: MTA-STS); empty when not known (the relay).",
        },
        stage: {
          type: "string",
          description:
            "Where the try ended: `connect`, `greeting`, `ehlo`, `starttls`, `rset`, `mail`, `rcpt`, `data` (the reply to the message), or `queue` (held back without being sent: the destination busy or suspended).",
        },
        reply: { type: "string", description: "The receiver's reply, or what went wrong without one." },
        enhancedCode: {
          type: "string",
          description: 'The reply\'s enhanced status code (RFC 3463), "" when it had none.',
        },
      },
    },
  },
};
