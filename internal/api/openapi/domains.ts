import { apiOperation, errorAnswer, jsonAnswer, rateLimitHeaders, schemaRef } from "./common";
import { DOMAIN_NAME_PATTERN } from "./patterns";
import type { ApiArea } from "./types";

// /api/v1/domains: sending domains, their DNS records (docs/domains.md) and DKIM rotation.

const DOMAIN_ID = { type: "string", pattern: "^dom_[0-9a-f]{24}$" };

const idParam = {
  name: "id",
  in: "path",
  required: true,
  description: "The domain's id.",
  schema: DOMAIN_ID,
  example: "dom_5f1d2c3b4a5968778695a4b3",
};

const idInvalid = jsonAnswer("The id is not a domain's id; `field` names it.", schemaRef("ValidationFailed"));
const notFound = errorAnswer("No such domain in this organization.", ["NOT_FOUND"]);
const status = { type: "string", enum: ["pending", "verified", "failed"] };

export const domainsArea: ApiArea = {
  tag: {
    name: "Domains",
    description:
      "The domains an organization sends from. Adding one makes its DKIM key (RSA-2048, and Ed25519 beside it where the operator turned it on) and lists the DNS records to publish: the ownership TXT record, a DKIM TXT record per active or pending key, the return path's MX and SPF records at its `bounces` subdomain, and DMARC advice. Records are checked as a receiver reads them; a domain may send once every record it waits on is verified, and goes on sending (signed) if a record disappears later: its status says `failed`, with the reason, and `domain.failed` is sent to the webhooks. No answer ever holds a private key.",
  },
  paths: {
    "/api/v1/domains": {
      post: apiOperation({
        operationId: "createDomain",
        summary: "Add a domain",
        description:
          "Adds a sending domain with its DKIM key; its records are pending until published and verified. An internationalized name is stored and shown as punycode.",
        tags: ["Domains"],
        requestBody: {
          required: true,
          content: { "application/json": { schema: schemaRef("CreateDomainRequest") } },
        },
        responses: {
          "201": jsonAnswer("Added: the domain with the records to publish.", schemaRef("Domain")),
          "400": errorAnswer("The body is not JSON.", ["INVALID_JSON"]),
          "409": errorAnswer("The organization has this domain already, or another organization has verified it.", [
            "DOMAIN_TAKEN",
          ]),
          "413": errorAnswer("The body is larger than 1 MB.", ["PAYLOAD_TOO_LARGE"]),
          "415": errorAnswer("The body is not sent as application/json.", ["UNSUPPORTED_MEDIA_TYPE"]),
          "422": jsonAnswer("`name` is not a domain name; `field` names it.", schemaRef("ValidationFailed")),
        },
      }),
      get: apiOperation({
        operationId: "listDomains",
        summary: "List domains",
        description: "Every sending domain of the organization, by name, with its records as last checked.",
        tags: ["Domains"],
        responses: {
          "200": jsonAnswer("The domains.", {
            type: "object",
            required: ["data"],
            properties: { data: { type: "array", items: schemaRef("Domain") } },
          }),
        },
      }),
    },
    "/api/v1/domains/{id}": {
      get: apiOperation({
        operationId: "getDomain",
        summary: "Get a domain",
        description: "The domain with its records as last checked (the recheck runs every `DOMAIN_RECHECK_S`).",
        tags: ["Domains"],
        parameters: [idParam],
        responses: { "200": jsonAnswer("The domain.", schemaRef("Domain")), "404": notFound, "422": idInvalid },
      }),
      delete: apiOperation({
        operationId: "deleteDomain",
        summary: "Remove a domain",
        description: "Removes the domain and its DKIM keys; mail from it is refused from now on.",
        tags: ["Domains"],
        parameters: [idParam],
        responses: {
          "204": { description: "Removed.", headers: rateLimitHeaders },
          "404": notFound,
          "422": idInvalid,
        },
      }),
    },
    "/api/v1/domains/{id}/verify": {
      post: apiOperation({
        operationId: "verifyDomain",
        summary: "Check a domain's records now",
        description:
          "Looks every record up in DNS now, as a receiver does, and answers the domain with each record's status and reason. A DNS server that does not answer (a timeout, a server failure) changes nothing: `dnsAnswered` is false and the records keep their last status, their reasons saying why. A rotation's pending key starts signing when its record verifies. No body.",
        tags: ["Domains"],
        parameters: [idParam],
        responses: {
          "200": jsonAnswer("The domain as checked.", schemaRef("DomainChecked")),
          "404": notFound,
          "422": idInvalid,
        },
      }),
    },
    "/api/v1/domains/{id}/dkim/rotate": {
      post: apiOperation({
        operationId: "rotateDomainKey",
        summary: "Rotate the DKIM key",
        description:
          "Makes a new key under a new selector, pending: its record is listed to publish, the old key signs until the new record verifies (on a verify or the recheck), then the new key signs and the old record is shown as still needed for 7 days, then removable. No body.",
        tags: ["Domains"],
        parameters: [idParam],
        responses: {
          "200": jsonAnswer("The domain with the pending key's record.", schemaRef("Domain")),
          "404": notFound,
          "409": errorAnswer("A rotation is pending already: publish its record and verify first.", [
            "ROTATION_PENDING",
          ]),
          "422": idInvalid,
        },
      }),
    },
  },
  schemas: {
    CreateDomainRequest: {
      type: "object",
      required: ["name"],
      properties: {
        name: {
          type: "string",
          maxLength: 253,
          pattern: DOMAIN_NAME_PATTERN,
          format: "domain-name",
          description:
            "A domain name (format `domain-name`: labels of letters, digits and inner hyphens, the last starting with a letter; an internationalized one is stored and shown as punycode).",
        },
      },
      additionalProperties: false,
    },
    Domain: {
      type: "object",
      required: ["id", "name", "status", "records", "createdAt", "checkedAt"],
      properties: {
        id: DOMAIN_ID,
        name: { type: "string", description: "ASCII, lower case: punycode for an internationalized name." },
        status: {
          ...status,
          description: "verified: every record it waits on is verified; failed: one of them failed; pending otherwise.",
        },
        records: { type: "array", items: schemaRef("DomainRecord") },
        createdAt: { type: "string", format: "date-time" },
        checkedAt: { type: ["string", "null"], format: "date-time", description: "The last check; null: never." },
      },
    },
    DomainChecked: {
      allOf: [schemaRef("Domain")],
      required: ["dnsAnswered"],
      properties: {
        dnsAnswered: { type: "boolean", description: "False when DNS did not answer: nothing changed state." },
      },
    },
    DomainRecord: {
      type: "object",
      required: ["purpose", "type", "name", "value", "status", "reason"],
      properties: {
        purpose: { type: "string", enum: ["verification", "dkim", "return-path", "spf", "dmarc"] },
        type: { type: "string", enum: ["TXT", "MX"] },
        name: { type: "string", description: "The fully qualified name to publish at." },
        value: {
          type: "string",
          description:
            "Exactly what to publish (a DKIM key's TXT value is one string; DNS hosts split it into strings of 255 characters).",
        },
        status,
        reason: { type: ["string", "null"], description: "Why it is pending or failed, or a note; null otherwise." },
      },
    },
  },
};
