import { audienceArea } from "./audience";
import { automationArea, workflowsArea } from "./automation";
import { COMPONENTS } from "./common";
import { domainsArea } from "./domains";
import { emailsArea } from "./emails";
import { EXAMPLES } from "./examples";
import { serviceArea } from "./service";
import { suppressionsArea } from "./suppressions";
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
  domainsArea,
  automationArea,
  workflowsArea,
  suppressionsArea,
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
    paths: withExamples(paths),
    components: { ...COMPONENTS, schemas },
  };
}

type Obj = Record<string, unknown>;

/** The paths with every operation's examples in place; an operation without any, or an example with no place, is an error. */
function withExamples(paths: Record<string, unknown>): Record<string, unknown> {
  // The areas share parameter and answer objects between operations: each operation gets its own.
  const out = structuredClone(paths) as Record<string, Record<string, Obj>>;
  const unused = new Set(Object.keys(EXAMPLES));
  for (const [path, item] of Object.entries(out)) {
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      const id = op.operationId as string;
      const examples = EXAMPLES[id];
      if (!examples) throw new Error(`${where} has no examples`);
      unused.delete(id);
      const media = (holder: unknown, what: string): Obj => {
        const m = ((holder as Obj | undefined)?.content as Obj | undefined)?.["application/json"];
        if (!m) throw new Error(`${where}: an example for ${what}, which has no JSON body`);
        return m as Obj;
      };
      if (examples.request !== undefined) media(op.requestBody, "the request").example = examples.request;
      for (const [name, value] of Object.entries(examples.query ?? {})) {
        const param = (op.parameters as Obj[] | undefined)?.find((p) => p.in === "query" && p.name === name);
        if (!param) throw new Error(`${where}: an example for ${name}, which is not a query parameter`);
        param.example = value;
      }
      for (const [status, value] of Object.entries(examples.responses)) {
        media((op.responses as Obj)[status], `the ${status} answer`).example = value;
      }
    }
  }
  if (unused.size) throw new Error(`examples of operations the document does not have: ${[...unused].join(", ")}`);
  return out;
}
