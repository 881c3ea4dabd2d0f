import { audienceArea } from "./audience";
import { automationArea, workflowsArea } from "./automation";
import { COMPONENTS } from "./common";
import { emailsArea } from "./emails";
import { serviceArea } from "./service";
import { tagsArea } from "./tags";
import type { ApiArea } from "./types";
import { webhooksArea } from "./webhooks";

// The OpenAPI 3.1 document of the whole HTTP API, assembled from one module per area: a new
// group of endpoints is one more module in AREAS.

export const AREAS: readonly ApiArea[] = [
  emailsArea,
  audienceArea,
  tagsArea,
  webhooksArea,
  automationArea,
  workflowsArea,
  serviceArea,
];

/** The API's version: the path prefix /api/v1. */
const API_VERSION = "1";

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = { ...COMPONENTS.schemas };
  for (const area of AREAS) {
    for (const [path, item] of Object.entries(area.paths)) {
      if (path in paths) throw new Error(`${path} is documented by two areas`);
      paths[path] = item;
    }
    for (const [name, schema] of Object.entries(area.schemas ?? {})) {
      if (name in schemas) throw new Error(`schema ${name} is defined by two areas`);
      schemas[name] = schema;
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "mailcore HTTP API",
      version: API_VERSION,
      summary: "Transactional email with per-organization quotas and priority lanes.",
      description:
        'Every /api/v1 endpoint takes `Authorization: Bearer <API token>` and answers with the rate-limit headers. The organization\'s quota is a bucket of q requests refilled continuously at q per 60 seconds (free 100, premium 700, enterprise 2000); every client IP may make 500 requests per second. Errors are `{"code","message"}`. Rate limits in full: /docs/rate-limits.',
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    },
    servers: [{ url: "/", description: "This API" }],
    security: [{ bearerAuth: [] }],
    tags: AREAS.map((a) => a.tag),
    paths,
    components: { ...COMPONENTS, schemas },
  };
}
