import { QUEUE_FULL_MESSAGES } from "../../mail/policy";
import type { Operation, Schema } from "./types";

// What every endpoint of /api/v1 shares: bearer authentication, the rate-limit headers on
// every answer, the error body, and the answers any endpoint may give (401, 429,
// 503).

const ref = (name: string) => ({ $ref: `#/components/${name}` });
export const schemaRef = (name: string) => ref(`schemas/${name}`);

const RATE_LIMIT_HEADERS: Record<string, { description: string; example: string }> = {
  "RateLimit-Policy": {
    description: 'The policy: the plan\'s name, its quota q and the window w in seconds, e.g. `"premium";q=700;w=60`.',
    example: '"premium";q=700;w=60',
  },
  RateLimit: {
    description: 'Requests remaining r and whole seconds t until the bucket is full again, e.g. `"premium";r=699;t=1`.',
    example: '"premium";r=699;t=1',
  },
  "RateLimit-Limit": { description: "The quota: requests per minute.", example: "700" },
  "RateLimit-Remaining": {
    description: "Whole requests left in the bucket after this one. It grows back continuously.",
    example: "699",
  },
  "RateLimit-Reset": { description: "Whole seconds until the bucket is full again (0 when full).", example: "1" },
  "X-RateLimit-Limit": { description: "Legacy copy of RateLimit-Limit.", example: "700" },
  "X-RateLimit-Remaining": { description: "Legacy copy of RateLimit-Remaining.", example: "699" },
  "X-RateLimit-Reset": { description: "Legacy copy of RateLimit-Reset.", example: "1" },
};

/** The rate-limit headers, as references; every /api/v1 answer carries them. */
export const rateLimitHeaders = Object.fromEntries(
  Object.keys(RATE_LIMIT_HEADERS).map((name) => [name, ref(`headers/${name}`)]),
);

/** An answer with a JSON body and the rate-limit headers. */
export function jsonAnswer(description: string, schema: Schema, extraHeaders: Record<string, unknown> = {}) {
  return {
    description,
    headers: { ...rateLimitHeaders, ...extraHeaders },
    content: { "application/json": { schema } },
  };
}

/** An error answer: {"code","message"} with the codes this endpoint may give, the first as its example. */
export function errorAnswer(description: string, codes: string[]) {
  const answer = jsonAnswer(description, { allOf: [schemaRef("Error")], properties: { code: { enum: codes } } });
  return {
    ...answer,
    content: {
      "application/json": { ...answer.content["application/json"], example: { code: codes[0], message: description } },
    },
  };
}

/** The answers of every /api/v1 endpoint, besides its own. */
export const COMMON_ANSWERS = {
  "401": ref("responses/Unauthorized"),
  "429": ref("responses/TooManyRequests"),
  "503": ref("responses/LimiterUnavailable"),
};

/** An /api/v1 operation: bearer auth and the common answers added to its own. */
export function apiOperation(op: Operation & { responses: Record<string, unknown> }): Operation {
  // An operation's own answer for a shared status (the 429 of a send) is the more precise one.
  return { security: [{ bearerAuth: [] }], ...op, responses: { ...COMMON_ANSWERS, ...op.responses } };
}

/**
 * A create the records make (a campaign, a workflow, a webhook, a webhook's test event, a tag, a
 * subscriber upsert): the Idempotency-Key it takes, the 400 and 409 of the key, and the 503 of
 * records that did not answer in time, added to its operation's own.
 */
/**
 * A create that takes an Idempotency-Key: its parameter and answers. `conflict`: a 409 of the
 * operation's own besides the key's (its code and when it is given).
 */
export function idempotentCreate<T extends Operation & { responses: Record<string, unknown> }>(
  op: T,
  conflict?: { code: string; when: string },
): T {
  const parameter = {
    name: "Idempotency-Key",
    in: "header",
    required: false,
    description:
      "Kept 24 hours per organization, committed with the create: the same key with the same request answers what the first answered and creates nothing; with another request, 409.",
    schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,255}$" },
  };
  return {
    ...op,
    parameters: [...((op.parameters as unknown[]) ?? []), parameter],
    responses: {
      ...op.responses,
      "400": op.requestBody
        ? errorAnswer("The body is not JSON, or the Idempotency-Key is malformed.", [
            "INVALID_JSON",
            "INVALID_IDEMPOTENCY_KEY",
          ])
        : errorAnswer("The Idempotency-Key is malformed.", ["INVALID_IDEMPOTENCY_KEY"]),
      "409": conflict
        ? errorAnswer(
            `The Idempotency-Key was used with a different request, or ${conflict.when} (\`${conflict.code}\`).`,
            ["IDEMPOTENCY_KEY_REUSED", conflict.code],
          )
        : errorAnswer("The Idempotency-Key was used with a different request.", ["IDEMPOTENCY_KEY_REUSED"]),
      "503": ref("responses/RecordsUnavailable"),
    },
  };
}

export const COMPONENTS = {
  securitySchemes: {
    bearerAuth: {
      type: "http",
      scheme: "bearer",
      description:
        "An API token (`mc_` and 43 base64url characters), made in the console under API Tokens or with `bun run cmd/admin token create`.",
    },
  },
  headers: {
    ...Object.fromEntries(
      Object.entries(RATE_LIMIT_HEADERS).map(([name, { description, example }]) => [
        name,
        { description, schema: { type: "string" }, example },
      ]),
    ),
    "Retry-After": {
      description: "Whole seconds to wait before retrying (at least 1).",
      schema: { type: "integer", minimum: 1 },
      example: 1,
    },
  },
  schemas: {
    Error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", pattern: "^[A-Z][A-Z0-9_]*$", description: "What went wrong, UPPER_SNAKE_CASE." },
        message: { type: "string", description: "For people: what went wrong and what to do." },
      },
    },
    TooManyRequests: {
      type: "object",
      description: "The organization's quota or the IP limit was exceeded.",
      required: ["message", "docs"],
      properties: {
        message: { const: "Too many requests" },
        docs: { type: "string", format: "uri", description: "The rate-limit reference." },
      },
      additionalProperties: false,
    },
    RecipientRateLimited: {
      type: "object",
      description: "A recipient guard refused a transactional send; a higher plan does not cure it.",
      required: ["code", "message"],
      properties: {
        code: { const: "RECIPIENT_RATE_LIMITED" },
        message: { const: "This recipient is temporarily rate limited." },
      },
      additionalProperties: false,
    },
    QueueFull: {
      type: "object",
      description:
        "The organization has as many messages queued (accepted and not yet delivered, bounced or failed), or as many bytes of them, as it may (the operator's MAX_QUEUED_PER_ORG and MAX_QUEUED_BYTES_PER_ORG). Nothing was queued; the queue drains at the lanes' pace.",
      required: ["code", "message"],
      properties: {
        code: { const: "QUEUE_FULL" },
        message: { type: "string", example: QUEUE_FULL_MESSAGES.messages },
      },
      additionalProperties: false,
    },
  },
  responses: {
    Unauthorized: {
      description:
        "No token, a malformed Authorization header, or a token that is unknown or revoked. The rate-limit headers advertise the minimum policy (free, r=100, t=0).",
      headers: {
        ...rateLimitHeaders,
        "WWW-Authenticate": { description: 'Bearer realm="api"', schema: { type: "string" } },
      },
      content: {
        "application/json": {
          schema: {
            allOf: [schemaRef("Error")],
            properties: { code: { enum: ["MISSING_TOKEN", "INVALID_AUTHORIZATION", "INVALID_TOKEN"] } },
          },
          example: { code: "INVALID_TOKEN", message: "The token is unknown or revoked." },
        },
      },
    },
    TooManyRequests: {
      description:
        "Over the organization's requests-per-minute quota or the IP limit (500 requests per second). Nothing was consumed; retry after Retry-After seconds.",
      headers: { ...rateLimitHeaders, "Retry-After": ref("headers/Retry-After") },
      content: {
        "application/json": {
          schema: schemaRef("TooManyRequests"),
          example: { message: "Too many requests", docs: "https://mail.example.com/docs/rate-limits" },
        },
      },
    },
    LimiterUnavailable: {
      description: "The rate limiter cannot be reached: the request was not served. Retry shortly.",
      headers: { "Retry-After": ref("headers/Retry-After") },
      content: {
        "application/json": {
          schema: { allOf: [schemaRef("Error")], properties: { code: { const: "LIMITER_UNAVAILABLE" } } },
          example: { code: "LIMITER_UNAVAILABLE", message: "The rate limiter is unavailable; retry shortly." },
        },
      },
    },
    RecordsUnavailable: {
      description:
        "The rate limiter cannot be reached (`LIMITER_UNAVAILABLE`: the request was not served), or the records did not answer within AUDIENCE_TIMEOUT_MS (`RECORDS_TIMEOUT`: nothing was written). Retry after Retry-After seconds, with the same Idempotency-Key.",
      headers: { "Retry-After": ref("headers/Retry-After") },
      content: {
        "application/json": {
          schema: {
            allOf: [schemaRef("Error")],
            properties: { code: { enum: ["LIMITER_UNAVAILABLE", "RECORDS_TIMEOUT"] } },
          },
          example: { code: "RECORDS_TIMEOUT", message: "The records did not answer in time; nothing was written." },
        },
      },
    },
  },
};
