import { templatePattern } from "../web/routes";
import { emailStats, getEmail, listEmails } from "./activity";
import {
  createTag,
  deleteSubscriber,
  deleteTag,
  getSubscriber,
  listSubscriberEvents,
  listSubscribers,
  listTags,
  tagSubscriber,
  untagSubscriber,
  updateSubscriber,
  upsertSubscriber,
  upsertSubscribers,
} from "./audience";
import { createDomain, deleteDomain, getDomain, listDomains, rotateDomainKey, verifyDomain } from "./domains";
import { cancelCampaign, createCampaign, getCampaign, listCampaigns, sendCampaign } from "./campaigns";
import type { Route } from "./respond";
import { sendEmail } from "./send";
import { addSuppression, deleteSuppression, listSuppressions } from "./suppressions";
import {
  createWebhook,
  deleteWebhook,
  listWebhookDeliveries,
  listWebhooks,
  retryWebhookDelivery,
  testWebhook,
} from "./webhooks";
import {
  createWorkflow,
  deleteWorkflow,
  getWorkflow,
  listWorkflowRuns,
  listWorkflows,
  rotateWorkflowSecret,
  updateWorkflow,
} from "./workflows";

/** The one route whose admission carries the organization's tags. */
export const TAGS_PATH = "/api/v1/tags";

/**
 * Every admitted route of the API: a path template of the OpenAPI document and its handler by
 * method. The first match serves a path (/subscribers/batch before /subscribers/{id}); the
 * order of the methods is the order of the Allow header.
 */
export const API_ROUTES: readonly (readonly [string, Route])[] = [
  [TAGS_PATH, { GET: listTags, POST: createTag }],
  ["/api/v1/emails", { GET: listEmails, POST: sendEmail }],
  ["/api/v1/emails/{id}", { GET: getEmail }],
  ["/api/v1/stats/emails", { GET: emailStats }],
  ["/api/v1/subscribers", { GET: listSubscribers, POST: upsertSubscriber }],
  ["/api/v1/subscribers/batch", { POST: upsertSubscribers }],
  ["/api/v1/subscribers/{id}", { GET: getSubscriber, PATCH: updateSubscriber, DELETE: deleteSubscriber }],
  ["/api/v1/subscribers/{id}/tags", { POST: tagSubscriber, DELETE: untagSubscriber }],
  ["/api/v1/subscribers/{id}/events", { GET: listSubscriberEvents }],
  ["/api/v1/tags/{name}", { DELETE: deleteTag }],
  ["/api/v1/webhooks", { POST: createWebhook, GET: listWebhooks }],
  ["/api/v1/webhooks/{id}", { DELETE: deleteWebhook }],
  ["/api/v1/webhooks/{id}/deliveries", { GET: listWebhookDeliveries }],
  ["/api/v1/webhooks/{id}/test", { POST: testWebhook }],
  ["/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry", { POST: retryWebhookDelivery }],
  ["/api/v1/campaigns", { GET: listCampaigns, POST: createCampaign }],
  ["/api/v1/campaigns/{id}", { GET: getCampaign }],
  ["/api/v1/campaigns/{id}/send", { POST: sendCampaign }],
  ["/api/v1/campaigns/{id}/cancel", { POST: cancelCampaign }],
  ["/api/v1/workflows", { GET: listWorkflows, POST: createWorkflow }],
  ["/api/v1/workflows/{id}", { GET: getWorkflow, PATCH: updateWorkflow, DELETE: deleteWorkflow }],
  ["/api/v1/workflows/{id}/secret", { POST: rotateWorkflowSecret }],
  ["/api/v1/workflows/{id}/runs", { GET: listWorkflowRuns }],
  ["/api/v1/domains", { GET: listDomains, POST: createDomain }],
  ["/api/v1/domains/{id}", { GET: getDomain, DELETE: deleteDomain }],
  ["/api/v1/domains/{id}/verify", { POST: verifyDomain }],
  ["/api/v1/domains/{id}/dkim/rotate", { POST: rotateDomainKey }],
  ["/api/v1/suppressions", { GET: listSuppressions, POST: addSuppression }],
  ["/api/v1/suppressions/{email}", { DELETE: deleteSuppression }],
];

/** A route of the table as the front matches it: for dispatch, the metrics' labels and the test that holds it to the document. */
export interface ApiRoute {
  template: string;
  pattern: RegExp;
  route: Route;
  methods: string[];
}

export const ROUTES: readonly ApiRoute[] = API_ROUTES.map(([template, route]) => ({
  template,
  pattern: templatePattern(template),
  route,
  methods: Object.keys(route),
}));
