import { body, invalid, list, noContent, paging, TAG_NAME, unreadable } from "./audience";
import { apiOperation, errorAnswer, idempotentCreate, jsonAnswer, schemaRef } from "./common";
import { MAILBOX, MESSAGE_PARTS, NAME, SUBJECT } from "./message";
import type { ApiArea } from "./types";
import { HTTP_URL, retries, webhookSecret } from "./webhooks";

// Campaigns (one message to every subscriber of an audience, through the bulk lane) and
// workflows (steps run for a subscriber when it is created or tagged).

const campaignRef = {
  name: "id",
  in: "path",
  required: true,
  description: "The campaign's id.",
  schema: { type: "string" },
  example: "cmp_0192f3a4b5c6d7e8f9a0b1c2",
};
const notFound = errorAnswer("No such campaign in this organization.", ["NOT_FOUND"]);
const wrongState = errorAnswer("The campaign is not in a state that allows this (sent, cancelled, or finished).", [
  "CAMPAIGN_STATE",
]);
const campaign = (description: string) => jsonAnswer(description, schemaRef("Campaign"));
const count = { type: "integer", minimum: 0 };
const workflowRef = { ...campaignRef, description: "The workflow's id.", example: "wf_0192f3a4b5c6d7e8f9a0b1c2" };
const workflowNotFound = errorAnswer("No such workflow in this organization.", ["NOT_FOUND"]);
const workflow = (description: string) => jsonAnswer(description, schemaRef("Workflow"));
const message = {
  from: {
    ...MAILBOX,
    description: "An address of a verified sending domain, optionally with a display name.",
    example: "Acme News <news@acme.example>",
  },
  subject: SUBJECT,
  html: { type: "string" },
  text: { type: "string" },
  markdown: {
    type: "string",
    description: "Rendered to HTML (placeholders kept); also the text part when there is none.",
  },
};
const tagStep = (type: string) => ({
  type: "object",
  required: ["type", "tag"],
  properties: { type: { const: type }, tag: TAG_NAME },
  additionalProperties: false,
});

/**
 * One of several named shapes, told apart by their `type`. `type: object` is said here too: Ajv
 * applies a discriminator to objects only, and would let any other value through.
 */
const discriminated = (byType: Record<string, string>) => ({
  type: "object",
  oneOf: Object.values(byType).map(schemaRef),
  discriminator: {
    propertyName: "type",
    mapping: Object.fromEntries(Object.entries(byType).map(([type, name]) => [type, `#/components/schemas/${name}`])),
  },
});

export const workflowsArea: ApiArea = {
  tag: {
    name: "Workflows",
    description:
      "Steps run for a subscriber when it is created or a tag is added to it, by a change made with `triggerWorkflows` true (an identical change retried starts nothing). A run is durable: a wait is a due time in the records, each step runs once per run. An email step is a transactional send with every guard of POST /api/v1/emails. A webhook step is signed like a webhook endpoint's deliveries, with the workflow's secret (`whsec_...`, in the answer of POST /api/v1/workflows and of POST /api/v1/workflows/{id}/secret only).",
  },
  paths: {
    "/api/v1/workflows": {
      get: apiOperation({
        operationId: "listWorkflows",
        summary: "List workflows",
        description: "Newest first.",
        tags: ["Workflows"],
        parameters: paging,
        responses: { "200": jsonAnswer("A page of workflows.", list(schemaRef("Workflow"))), "422": invalid },
      }),
      post: apiOperation(
        idempotentCreate({
          operationId: "createWorkflow",
          summary: "Create a workflow",
          tags: ["Workflows"],
          description: "The answer holds the secret of its webhook steps, shown this once.",
          requestBody: body("WorkflowCreate"),
          responses: {
            "201": jsonAnswer("The workflow; keep the secret.", schemaRef("WorkflowCreated")),
            "422": invalid,
            ...unreadable,
          },
        }),
      ),
    },
    "/api/v1/workflows/{id}": {
      get: apiOperation({
        operationId: "getWorkflow",
        summary: "Read a workflow",
        tags: ["Workflows"],
        parameters: [workflowRef],
        responses: { "200": workflow("The workflow."), "404": workflowNotFound },
      }),
      patch: apiOperation({
        operationId: "updateWorkflow",
        summary: "Change a workflow",
        description: "What is given changes. Runs under way go on with the steps as they are when each step runs.",
        tags: ["Workflows"],
        parameters: [workflowRef],
        requestBody: body("WorkflowPatch"),
        responses: { "200": workflow("The workflow."), "404": workflowNotFound, "422": invalid, ...unreadable },
      }),
      delete: apiOperation({
        operationId: "deleteWorkflow",
        summary: "Delete a workflow",
        description: "With its runs; those under way stop.",
        tags: ["Workflows"],
        parameters: [workflowRef],
        responses: { "204": noContent("Deleted."), "404": workflowNotFound },
      }),
    },
    "/api/v1/workflows/{id}/secret": {
      post: apiOperation({
        operationId: "rotateWorkflowSecret",
        summary: "Replace a workflow's signing secret",
        description:
          "A new secret for the workflow's webhook steps, shown this once; the old one signs nothing from now on (the next attempt of a step under way is signed with the new one).",
        tags: ["Workflows"],
        parameters: [workflowRef],
        responses: {
          "200": jsonAnswer("The new secret; keep it.", schemaRef("WorkflowSecret")),
          "404": workflowNotFound,
        },
      }),
    },
    "/api/v1/workflows/{id}/runs": {
      get: apiOperation({
        operationId: "listWorkflowRuns",
        summary: "List a workflow's runs",
        description: "Newest first, with the step each is at and its state.",
        tags: ["Workflows"],
        parameters: [workflowRef, ...paging],
        responses: {
          "200": jsonAnswer("A page of runs.", list(schemaRef("WorkflowRun"))),
          "404": workflowNotFound,
          "422": invalid,
        },
      }),
    },
  },
  schemas: {
    WorkflowTrigger: discriminated({
      "subscriber.created": "WorkflowTriggerSubscriberCreated",
      "tag.added": "WorkflowTriggerTagAdded",
    }),
    WorkflowTriggerSubscriberCreated: {
      type: "object",
      required: ["type"],
      properties: { type: { const: "subscriber.created" } },
      additionalProperties: false,
    },
    WorkflowTriggerTagAdded: {
      type: "object",
      required: ["type", "tag"],
      properties: { type: { const: "tag.added" }, tag: TAG_NAME },
      additionalProperties: false,
    },
    WorkflowStep: discriminated({
      wait: "WorkflowStepWait",
      email: "WorkflowStepEmail",
      add_tag: "WorkflowStepAddTag",
      remove_tag: "WorkflowStepRemoveTag",
      webhook: "WorkflowStepWebhook",
    }),
    WorkflowStepWait: {
      type: "object",
      required: ["type", "seconds"],
      properties: { type: { const: "wait" }, seconds: { type: "integer", minimum: 1, maximum: 7776000 } },
      additionalProperties: false,
    },
    WorkflowStepEmail: {
      type: "object",
      required: ["type", "from", "subject"],
      properties: { type: { const: "email" }, ...message },
      ...MESSAGE_PARTS,
      additionalProperties: false,
      description: "One of html, text or markdown, not empty; markdown not with html.",
    },
    WorkflowStepAddTag: tagStep("add_tag"),
    WorkflowStepRemoveTag: tagStep("remove_tag"),
    WorkflowStepWebhook: {
      type: "object",
      required: ["type", "url"],
      properties: {
        type: { const: "webhook" },
        url: HTTP_URL,
      },
      additionalProperties: false,
      description: `A webhook delivery, made by the workers: a POST of {"type":"workflow.step","timestamp","data":{"subscriber","workflowId","runId"}} signed with the workflow's secret (the headers of Webhooks, webhook-id the same on retries), to a public address only. The run waits: a 2xx within 15 s goes on; anything else is retried after ${retries} (each ±10%), and when the last fails the run fails.`,
    },
    WorkflowCreate: {
      type: "object",
      required: ["name", "trigger", "steps"],
      properties: {
        name: NAME,
        trigger: schemaRef("WorkflowTrigger"),
        steps: { type: "array", maxItems: 50, items: schemaRef("WorkflowStep") },
        active: { type: "boolean", default: false },
      },
      additionalProperties: false,
    },
    WorkflowPatch: {
      type: "object",
      properties: {
        name: NAME,
        trigger: schemaRef("WorkflowTrigger"),
        steps: { type: "array", maxItems: 50, items: schemaRef("WorkflowStep") },
        active: { type: "boolean" },
      },
      additionalProperties: false,
    },
    Workflow: {
      type: "object",
      required: ["id", "name", "trigger", "steps", "active", "createdAt", "updatedAt"],
      properties: {
        id: { type: "string", pattern: "^wf_[0-9a-f]{24}$" },
        name: { type: "string" },
        trigger: schemaRef("WorkflowTrigger"),
        steps: { type: "array", items: schemaRef("WorkflowStep") },
        active: { type: "boolean" },
        createdAt: { type: "string", format: "date-time" },
        updatedAt: { type: "string", format: "date-time" },
      },
    },
    WorkflowCreated: {
      allOf: [schemaRef("Workflow")],
      required: ["secret"],
      properties: { secret: webhookSecret },
      description: "A workflow as its create answers it: with the secret of its webhook steps, shown this once.",
    },
    WorkflowSecret: {
      type: "object",
      required: ["secret"],
      properties: { secret: webhookSecret },
      additionalProperties: false,
    },
    WorkflowRun: {
      type: "object",
      required: ["id", "subscriberId", "step", "state", "nextAt", "attempts", "createdAt", "updatedAt"],
      properties: {
        id: { type: "string", pattern: "^run_[0-9a-f]{24}$" },
        subscriberId: { type: "string" },
        step: {
          type: "integer",
          minimum: 0,
          description: "The index of the next step; the number of steps when every step ran.",
        },
        state: { type: "string", enum: ["active", "completed", "failed"] },
        nextAt: {
          type: ["string", "null"],
          format: "date-time",
          description: "When the next step runs (after a wait); null when the run ended.",
        },
        attempts: { type: "integer", minimum: 0, description: "Failed tries of the current step." },
        error: { type: "string" },
        createdAt: { type: "string", format: "date-time" },
        updatedAt: { type: "string", format: "date-time" },
      },
    },
  },
};

export const automationArea: ApiArea = {
  tag: {
    name: "Campaigns",
    description:
      "One message to every subscriber of an audience (some tags, or all), through the bulk lane at its pace, so a campaign never delays transactional mail. Unsubscribed subscribers, those on the suppression list and those a message bounced for are skipped. Subject and bodies may use {{subscriber.name}}, {{subscriber.email}}, {{subscriber.fields.KEY}} and {{unsubscribeUrl}}; every message carries the one-click List-Unsubscribe headers (RFC 8058).",
  },
  paths: {
    "/api/v1/campaigns": {
      get: apiOperation({
        operationId: "listCampaigns",
        summary: "List campaigns",
        description: "Newest first.",
        tags: ["Campaigns"],
        parameters: paging,
        responses: { "200": jsonAnswer("A page of campaigns.", list(schemaRef("Campaign"))), "422": invalid },
      }),
      post: apiOperation(
        idempotentCreate({
          operationId: "createCampaign",
          summary: "Create a campaign (a draft)",
          description:
            "The message is checked as a send is (From, subject, one of html, text or markdown); nothing is sent until POST .../send.",
          tags: ["Campaigns"],
          requestBody: body("CampaignCreate"),
          responses: { "201": campaign("The draft."), "422": invalid, ...unreadable },
        }),
      ),
    },
    "/api/v1/campaigns/{id}": {
      get: apiOperation({
        operationId: "getCampaign",
        summary: "Read a campaign and its stats",
        tags: ["Campaigns"],
        parameters: [campaignRef],
        responses: { "200": campaign("The campaign."), "404": notFound },
      }),
    },
    "/api/v1/campaigns/{id}/send": {
      post: apiOperation({
        operationId: "sendCampaign",
        summary: "Send a draft, now or at scheduledAt",
        description:
          "The audience is the subscribers there are when sending starts. Messages are queued a page ahead of the bulk lane's release. The From domain must be a verified sending domain when sending starts, or the campaign fails (`error` says why).",
        tags: ["Campaigns"],
        parameters: [campaignRef],
        requestBody: { required: false, content: { "application/json": { schema: schemaRef("CampaignSend") } } },
        responses: {
          "202": campaign("Sending, or scheduled."),
          "404": notFound,
          "409": wrongState,
          "422": invalid,
          ...unreadable,
        },
      }),
    },
    "/api/v1/campaigns/{id}/cancel": {
      post: apiOperation({
        operationId: "cancelCampaign",
        summary: "Cancel a campaign",
        description:
          "Nothing more is queued; messages already queued may still go. Cancelling a cancelled campaign is no change.",
        tags: ["Campaigns"],
        parameters: [campaignRef],
        responses: { "200": campaign("Cancelled."), "404": notFound, "409": wrongState },
      }),
    },
  },
  schemas: {
    Audience: {
      oneOf: [
        {
          type: "object",
          required: ["tags"],
          properties: { tags: { type: "array", minItems: 1, maxItems: 100, items: TAG_NAME } },
          additionalProperties: false,
          description: "Subscribers with any of the tags.",
        },
        {
          type: "object",
          required: ["all"],
          properties: { all: { const: true } },
          additionalProperties: false,
          description: "Every subscriber.",
        },
      ],
    },
    CampaignCreate: {
      type: "object",
      required: ["name", "from", "subject", "audience"],
      description:
        "One of html, text or markdown (rendered to HTML; also the text part), not empty; markdown not with html. Unknown fields are refused (422).",
      properties: { name: NAME, ...message, audience: schemaRef("Audience") },
      ...MESSAGE_PARTS,
      additionalProperties: false,
    },
    CampaignSend: {
      type: "object",
      properties: {
        scheduledAt: { type: "string", format: "date-time", description: "When to start; left out or past: now." },
      },
      additionalProperties: false,
    },
    Campaign: {
      type: "object",
      required: [
        "id",
        "name",
        "from",
        "subject",
        "html",
        "text",
        "audience",
        "status",
        "scheduledAt",
        "stats",
        "createdAt",
        "updatedAt",
      ],
      properties: {
        id: { type: "string", pattern: "^cmp_[0-9a-f]{24}$" },
        name: { type: "string" },
        from: { type: "string" },
        subject: { type: "string" },
        html: { type: "string" },
        text: { type: "string" },
        audience: schemaRef("Audience"),
        status: { type: "string", enum: ["draft", "scheduled", "sending", "sent", "cancelled", "failed"] },
        scheduledAt: { type: ["string", "null"], format: "date-time" },
        error: { type: "string", description: "Why a failed campaign failed." },
        stats: {
          type: "object",
          required: ["recipients", "queued", "delivered", "bounced", "failed", "skipped", "suppressed"],
          properties: {
            recipients: { ...count, description: "Subscribers of the audience when sending started." },
            queued: count,
            delivered: count,
            bounced: count,
            failed: count,
            skipped: {
              ...count,
              description: "Unsubscribed, on the suppression list, or a message to them bounced before.",
            },
            suppressed: { ...count, description: "Of the skipped, those on the organization's suppression list." },
          },
        },
        createdAt: { type: "string", format: "date-time" },
        updatedAt: { type: "string", format: "date-time" },
      },
    },
  },
};
