import { SUPPRESSION_REASONS } from "../../mail/suppression";
import { list, noContent, paging, subscriberEmailSchema } from "./audience";
import { apiOperation, errorAnswer, jsonAnswer, schemaRef } from "./common";
import type { ApiArea } from "./types";

const invalid = jsonAnswer("A field is invalid; `field` names it.", schemaRef("ValidationFailed"));
const reason = { type: "string", enum: [...SUPPRESSION_REASONS] };

export const suppressionsArea: ApiArea = {
  tag: {
    name: "Suppressions",
    description:
      "The organization's suppression list: addresses it sends nothing to. A hard bounce (`hard_bounce`: no such mailbox, a disabled one), soft bounces that repeat (`soft_bounce`: 3 since the last delivery, spread over 72 hours or more, within 30 days) and a complaint (`complaint`) put an address there; the organization adds (`manual`) and removes addresses itself. A send to a listed address is refused at once with 422 `RECIPIENT_SUPPRESSED` (nothing is queued; over SMTP, `550 5.7.1`); a campaign skips it and counts it under `suppressed`. Addresses are kept as the recipient guards see them: lower case, without a `+tag`.",
  },
  paths: {
    "/api/v1/suppressions": {
      get: apiOperation({
        operationId: "listSuppressions",
        summary: "List suppressed addresses",
        description: "The organization's suppression list, newest first, a page at a time; `reason` narrows it.",
        tags: ["Suppressions"],
        parameters: [
          {
            name: "reason",
            in: "query",
            required: false,
            description: "Only the addresses listed for this reason.",
            schema: reason,
          },
          ...paging,
        ],
        responses: {
          "200": jsonAnswer("A page of suppressed addresses.", list(schemaRef("Suppression"))),
          "422": invalid,
        },
      }),
      post: apiOperation({
        operationId: "addSuppression",
        summary: "Suppress an address",
        description:
          "Lists an address (reason `manual`). An address listed already keeps its listing, which the answer shows (200).",
        tags: ["Suppressions"],
        requestBody: {
          required: true,
          content: { "application/json": { schema: schemaRef("SuppressionCreate") } },
        },
        responses: {
          "201": jsonAnswer("Listed now.", schemaRef("Suppression")),
          "200": jsonAnswer("Listed already: its listing.", schemaRef("Suppression")),
          "400": errorAnswer("The body is not JSON.", ["INVALID_JSON"]),
          "413": errorAnswer("The body is larger than 1 MB.", ["PAYLOAD_TOO_LARGE"]),
          "415": errorAnswer("The body is not sent as application/json.", ["UNSUPPORTED_MEDIA_TYPE"]),
          "422": invalid,
        },
      }),
    },
    "/api/v1/suppressions/{email}": {
      delete: apiOperation({
        operationId: "deleteSuppression",
        summary: "Remove a suppressed address",
        description: "Takes the address off the list: sends to it are accepted again.",
        tags: ["Suppressions"],
        parameters: [
          {
            name: "email",
            in: "path",
            required: true,
            description: "The address, percent-encoded where it must be (compared lower-cased, without a `+tag`).",
            schema: subscriberEmailSchema("compared lower-cased, without a `+tag`"),
            example: "ada@example.com",
          },
        ],
        responses: {
          "204": noContent("Removed."),
          "404": errorAnswer("The address is not on this organization's suppression list.", ["NOT_FOUND"]),
          "422": invalid,
        },
      }),
    },
  },
  schemas: {
    RecipientSuppressed: {
      allOf: [schemaRef("Error")],
      description: "A send to an address on the organization's suppression list: nothing was queued.",
      properties: { code: { const: "RECIPIENT_SUPPRESSED" } },
      examples: [
        {
          code: "RECIPIENT_SUPPRESSED",
          message:
            "ada@example.com is on this organization's suppression list (hard_bounce); nothing was queued. Remove it with DELETE /api/v1/suppressions/{email} to send to it again.",
        },
      ],
    },
    Suppression: {
      type: "object",
      required: ["email", "reason", "detail", "messageId", "createdAt"],
      properties: {
        email: { type: "string", description: "Lower case, without a `+tag`." },
        reason,
        detail: {
          type: "string",
          description: "Why: the bounce's status and diagnostic, the complaint's feedback type, the note given.",
        },
        messageId: {
          type: ["string", "null"],
          description: "The message whose bounce or complaint listed it; null for an address added by hand.",
        },
        createdAt: { type: "string", format: "date-time" },
      },
    },
    SuppressionCreate: {
      type: "object",
      required: ["email"],
      description: "Unknown fields are refused (422).",
      properties: {
        email: subscriberEmailSchema("kept lower-cased, without a `+tag`"),
        detail: { type: "string", maxLength: 1000, description: "A note kept with it." },
      },
      additionalProperties: false,
    },
  },
};
