// An example request and answer for every operation of the document, by operationId: the body
// (or query) a client sends and the body of its success answer (an operation whose success has no
// body, a delete, shows its error answers' examples, which errorAnswer writes). The document carries them where
// OpenAPI puts them (the media type's `example`), so that /docs and generated clients show them;
// a test validates each against its schema, so an example cannot drift from what the API accepts.

import { TEST_EVENT } from "../../webhooks/events";

const AT = "2026-11-25T14:00:00.000Z";
const LATER = "2026-11-25T14:00:02.000Z";
const SUBSCRIBER_ID = "sub_5f1d2c3b4a5968778695a4b3";
const WORKFLOW_ID = "wf_0192f3a4b5c6d7e8f9a0b1c2";
const CAMPAIGN_ID = "cmp_0192f3a4b5c6d7e8f9a0b1c2";
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

const subscriber = {
  id: SUBSCRIBER_ID,
  email: "ada@example.com",
  name: "Ada Lovelace",
  status: "subscribed",
  fields: { plan: "pro", seats: 3 },
  tags: ["newsletter"],
  createdAt: AT,
  updatedAt: LATER,
};
const upsert = {
  email: "ada@example.com",
  name: "Ada Lovelace",
  fields: { plan: "pro", seats: 3 },
  tags: ["newsletter"],
};
const message = {
  from: "Acme News <news@acme.example>",
  subject: "What is new in November, {{subscriber.name}}",
  markdown: "**Hello {{subscriber.name}}**, here is the news. [Unsubscribe]({{unsubscribeUrl}})",
};
const workflowSteps = [
  { type: "email", from: "Acme <hello@acme.example>", subject: "Welcome", text: "Glad to have you." },
  { type: "wait", seconds: 86400 },
  { type: "add_tag", tag: "onboarded" },
  { type: "webhook", url: "https://hooks.acme.example/onboarded" },
];
const workflow = {
  id: WORKFLOW_ID,
  name: "Welcome",
  trigger: { type: "subscriber.created" },
  steps: workflowSteps,
  active: true,
  createdAt: AT,
  updatedAt: AT,
};
const campaign = {
  id: CAMPAIGN_ID,
  name: "November news",
  from: message.from,
  subject: message.subject,
  html: "<p><strong>Hello {{subscriber.name}}</strong>, here is the news.</p>",
  text: message.markdown,
  audience: { tags: ["newsletter"] },
  status: "draft",
  scheduledAt: null,
  stats: { recipients: 0, queued: 0, delivered: 0, bounced: 0, failed: 0, skipped: 0, suppressed: 0 },
  createdAt: AT,
  updatedAt: AT,
};
const webhook = {
  id: "wh_5f1d2c3b4a5968778695a4b3",
  url: "https://hooks.acme.example/mail",
  events: ["email.delivered", "email.bounced"],
  createdAt: AT,
  disabled: false,
  disabledAt: null,
  disabledReason: null,
  lastSuccessAt: "2026-11-25T13:01:12.000Z",
  lastFailureAt: "2026-11-25T14:01:40.000Z",
  consecutiveFailures: 14,
};
const emailListItem = {
  id: "msg_5f1d2c3b4a5968778695a4b3",
  status: "delivered",
  lane: "transactional",
  from: "Acme <hello@acme.example>",
  to: "ada@example.org",
  subject: "Your sign-in code",
  tags: ["signin"],
  createdAt: "2026-11-25T14:02:11.532Z",
  updatedAt: "2026-11-25T14:02:12.018Z",
};
const statsRow = {
  start: "2026-11-25T14:00:00.000Z",
  accepted: 120,
  delivered: 114,
  bounced: 3,
  failed: 0,
  deferred: 5,
  complained: 0,
  opened: { human: 41, machine: 37 },
  clicked: { human: 12, machine: 3 },
  refused: { quota: 12, ip: 0, recipient: 2 },
};
const testDelivery = {
  id: "whd_0a1b2c3d4e5f60718293a4b5",
  type: TEST_EVENT,
  state: "pending",
  createdAt: "2026-11-25T14:05:00.000Z",
  nextAttemptAt: "2026-11-25T14:05:00.000Z",
  attempts: [],
};
const page = (item: unknown) => ({ data: [item], nextCursor: null });

/** An operation's examples: its request body, its query parameters, and its answers' bodies by status. */
export interface OperationExamples {
  request?: unknown;
  query?: Record<string, unknown>;
  responses: Record<string, unknown>;
}

const DOMAIN_KEY =
  "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu5Y0kq1Qv3hA4l1xkqW0c6Qe2mJ8w7Kc3bNbVt1o4m0D9d5w5t2p8YqXb6m0gk1m3Q4mJx6f5l3s1uWqU8o2r9d4c7b6a5e4f3g2h1i0j9k8l7m6n5o4p3q2r1s0t9u8v7w6x5y4z3A2B1C0D9E8F7G6H5I4J3K2L1M0N9O8P7Q6R5S4T3U2V1W0X9Y8Z7a6b5c4d3e2f1g0h9i8j7k6l5m4n3o2p1q0r9s8t7u6v5w4x3y2z1A0B9C8D7E6F5G4H3I2J1K0L9M8N7O6P5Q4R3S2T1U0V9W8X7Y6Z5a4b3c2d1e0f9g8h7i6j5k4l3m2n1o0p9q8r7s6t5u4v3w2x1y0z9A8B7C6D5E4F3G2H1I0J9QIDAQAB";
const domain = {
  id: "dom_5f1d2c3b4a5968778695a4b3",
  name: "acme.example",
  status: "pending",
  records: [
    {
      purpose: "verification",
      type: "TXT",
      name: "_mailcore.acme.example",
      value: "mailcore-verify=5f1d2c3b4a5968778695a4b3",
      status: "verified",
      reason: null,
    },
    {
      purpose: "dkim",
      type: "TXT",
      name: "mc202611a._domainkey.acme.example",
      value: `v=DKIM1; k=rsa; p=${DOMAIN_KEY}`,
      status: "pending",
      reason: "no TXT record at mc202611a._domainkey.acme.example (the name does not exist)",
    },
    {
      purpose: "return-path",
      type: "MX",
      name: "bounces.acme.example",
      value: "10 mx.mail.example.net",
      status: "verified",
      reason: null,
    },
    {
      purpose: "spf",
      type: "TXT",
      name: "bounces.acme.example",
      value: "v=spf1 include:_spf.mail.example.net -all",
      status: "verified",
      reason: null,
    },
    {
      purpose: "dmarc",
      type: "TXT",
      name: "_dmarc.acme.example",
      value: "v=DMARC1; p=none; rua=mailto:dmarc-reports@acme.example",
      status: "pending",
      reason: "no TXT record at _dmarc.acme.example (the name does not exist)",
    },
  ],
  createdAt: AT,
  checkedAt: LATER,
};

const suppression = {
  email: "ada@example.com",
  reason: "hard_bounce",
  detail: "5.1.1: bad destination mailbox (550 5.1.1 <ada@example.com>: Recipient address rejected: User unknown)",
  messageId: "msg_0192f3a4b5c6d7e8f9a0b1c2",
  createdAt: AT,
};

export const EXAMPLES: Record<string, OperationExamples> = {
  listSuppressions: { query: { reason: "hard_bounce" }, responses: { "200": page(suppression) } },
  addSuppression: {
    request: { email: "ben@example.com", detail: "asked by phone not to be mailed" },
    responses: {
      "201": {
        email: "ben@example.com",
        reason: "manual",
        detail: "asked by phone not to be mailed",
        messageId: null,
        createdAt: AT,
      },
      "200": suppression,
    },
  },
  deleteSuppression: { responses: {} },
  sendEmail: {
    request: {
      from: "Acme <hello@acme.example>",
      to: "ada@example.com",
      subject: "Your sign-in code",
      text: "Your code is 424242. It expires in 10 minutes.",
      tags: ["sign-in"],
    },
    responses: { "202": { id: "msg_5f1d2c3b4a5968778695a4b3", status: "queued", lane: "transactional" } },
  },
  getEmail: {
    responses: {
      "200": {
        id: "msg_5f1d2c3b4a5968778695a4b3",
        lane: "transactional",
        status: "delivered",
        from: "Acme <hello@acme.example>",
        to: "ada@example.com",
        subject: "Your sign-in code",
        tags: ["signin"],
        attempts: 2,
        createdAt: AT,
        updatedAt: "2026-11-25T14:06:03.000Z",
        events: [
          { status: "queued", at: AT, detail: "accepted" },
          { status: "sending", at: "2026-11-25T14:00:00.050Z", detail: "attempt 1" },
          {
            status: "deferred",
            at: LATER,
            detail:
              "rcpt: 451 4.7.1 Greylisted, please try again in 300 seconds (mx1.example.com [192.0.2.10], TLS unverified)",
          },
          { status: "queued", at: "2026-11-25T14:06:02.000Z", detail: "retry" },
          { status: "sending", at: "2026-11-25T14:06:02.050Z", detail: "attempt 2" },
          {
            status: "delivered",
            at: "2026-11-25T14:06:03.000Z",
            detail: "data: 250 2.0.0 OK queued as 4XyZ (mx1.example.com [192.0.2.10], TLS unverified)",
          },
        ],
        deliveryAttempts: [
          {
            at: "2026-11-25T14:00:01.000Z",
            host: "mx1.example.com",
            address: "192.0.2.10",
            tls: "unverified",
            stage: "rcpt",
            reply: "451 4.7.1 Greylisted, please try again in 300 seconds",
            enhancedCode: "4.7.1",
          },
          {
            at: "2026-11-25T14:06:02.100Z",
            host: "mx1.example.com",
            address: "192.0.2.10",
            tls: "unverified",
            stage: "data",
            reply: "250 2.0.0 OK queued as 4XyZ",
            enhancedCode: "2.0.0",
          },
        ],
      },
    },
  },
  listSubscribers: {
    query: { tag: "newsletter", status: "subscribed", email: "ada@" },
    responses: { "200": { data: [subscriber], nextCursor: "c3ViXzVmMWQyYzNi" } },
  },
  upsertSubscriber: { request: upsert, responses: { "201": subscriber, "200": subscriber } },
  upsertSubscribers: {
    request: {
      subscribers: [upsert, { email: "grace@example.com", tags: ["newsletter"] }, { email: "not an address" }],
      triggerWorkflows: false,
    },
    responses: {
      "200": {
        data: [
          { email: "ada@example.com", result: "created", id: SUBSCRIBER_ID, error: null },
          { email: "grace@example.com", result: "unchanged", id: "sub_6a2e3d4c5b6a79889706b5c4", error: null },
          {
            email: "not an address",
            result: "error",
            id: null,
            error: "subscribers[2].email: must be one bare address",
            field: "subscribers[2].email",
          },
        ],
      },
    },
  },
  getSubscriber: { responses: { "200": subscriber } },
  updateSubscriber: {
    request: { name: "Ada King", fields: { seats: 5 } },
    responses: { "200": { ...subscriber, name: "Ada King", fields: { plan: "pro", seats: 5 } } },
  },
  deleteSubscriber: { responses: {} },
  addSubscriberTags: {
    request: { tags: ["vip"] },
    responses: { "200": { ...subscriber, tags: ["newsletter", "vip"] } },
  },
  removeSubscriberTags: {
    request: { tags: ["newsletter"], triggerWorkflows: false },
    responses: { "200": { ...subscriber, tags: [] } },
  },
  listSubscriberEvents: {
    responses: {
      "200": page({ type: "tag.added", at: LATER, data: { tag: "newsletter" }, triggerWorkflows: true }),
    },
  },
  listTags: { responses: { "200": { data: [{ name: "newsletter", subscribers: 1250 }] } } },
  createTag: { request: { name: "newsletter" }, responses: { "201": { name: "newsletter" } } },
  deleteTag: { responses: {} },
  createWebhook: {
    request: { url: webhook.url, events: webhook.events },
    responses: { "201": { ...webhook, secret: SECRET } },
  },
  listWebhooks: { responses: { "200": page(webhook) } },
  deleteWebhook: { responses: {} },
  createDomain: {
    request: { name: "acme.example" },
    responses: {
      "201": { ...domain, records: domain.records.map((r) => ({ ...r, status: "pending" })), checkedAt: null },
    },
  },
  listDomains: { responses: { "200": { data: [domain] } } },
  getDomain: { responses: { "200": domain } },
  verifyDomain: { responses: { "200": { ...domain, dnsAnswered: true } } },
  rotateDomainKey: { responses: { "200": domain } },
  deleteDomain: { responses: {} },
  listWebhookDeliveries: {
    responses: {
      "200": page({
        id: "msg_5f1d2c3b4a5968778695a4b3.email.delivered",
        type: "email.delivered",
        state: "pending",
        createdAt: AT,
        nextAttemptAt: "2026-11-25T14:00:35.000Z",
        attempts: [
          {
            attempt: 1,
            at: LATER,
            durationMs: 84,
            statusCode: 503,
            error: null,
            responseExcerpt: '{"error":"maintenance","retryAfter":30}',
          },
        ],
      }),
    },
  },
  listEmails: {
    query: { status: "delivered", to: "ada@example.org", tag: "signin", lane: "transactional" },
    responses: {
      "200": { data: [emailListItem], nextCursor: "MTc2NDA3OTMzMTUzMi5tc2dfNWYxZDJjM2I0YTU5Njg3Nzg2OTVhNGIz" },
    },
  },
  getEmailStats: {
    query: { since: "2026-11-25T13:00:00Z", until: "2026-11-25T15:00:00Z", interval: "hour" },
    responses: {
      "200": {
        interval: "hour",
        since: "2026-11-25T13:00:00.000Z",
        until: "2026-11-25T15:00:00.000Z",
        complaintRate: 0,
        data: [{ ...statsRow, start: "2026-11-25T13:00:00.000Z" }, statsRow],
      },
    },
  },
  testWebhook: { responses: { "202": testDelivery } },
  retryWebhookDelivery: {
    responses: {
      "202": {
        ...testDelivery,
        type: "email.bounced",
        attempts: [
          {
            attempt: 8,
            at: "2026-11-24T20:01:00.000Z",
            durationMs: 15_000,
            statusCode: null,
            error: "no answer within 15 s",
            responseExcerpt: "",
          },
        ],
      },
    },
  },
  listWorkflows: { responses: { "200": page(workflow) } },
  createWorkflow: {
    request: { name: workflow.name, trigger: workflow.trigger, steps: workflowSteps, active: true },
    responses: { "201": { ...workflow, secret: SECRET } },
  },
  getWorkflow: { responses: { "200": workflow } },
  updateWorkflow: { request: { active: false }, responses: { "200": { ...workflow, active: false } } },
  deleteWorkflow: { responses: {} },
  rotateWorkflowSecret: { responses: { "200": { secret: "whsec_3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAA" } } },
  listWorkflowRuns: {
    responses: {
      "200": page({
        id: "run_7b3f4e5d6c7b8a9908a7c6d5",
        subscriberId: SUBSCRIBER_ID,
        step: 2,
        state: "active",
        nextAt: "2026-11-26T14:00:00.000Z",
        attempts: 0,
        createdAt: AT,
        updatedAt: AT,
      }),
    },
  },
  listCampaigns: { responses: { "200": page(campaign) } },
  createCampaign: {
    request: { name: campaign.name, ...message, audience: campaign.audience },
    responses: { "201": campaign },
  },
  getCampaign: { responses: { "200": campaign } },
  sendCampaign: {
    request: { scheduledAt: "2026-11-26T09:00:00.000Z" },
    responses: { "202": { ...campaign, status: "scheduled", scheduledAt: "2026-11-26T09:00:00.000Z" } },
  },
  cancelCampaign: { responses: { "200": { ...campaign, status: "cancelled" } } },
  health: { responses: { "200": { status: "ok" } } },
  ready: { responses: { "200": { status: "ready" } } },
  openApiDocument: {
    responses: { "200": { openapi: "3.1.0", info: { title: "mailcore HTTP API", version: "1" }, paths: {} } },
  },
};
