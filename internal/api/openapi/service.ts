import type { ApiArea } from "./types";

// The endpoints of the service itself: health, and this document. Neither needs a token nor
// counts against a limit.

const status = (value: string) => ({ type: "object", required: ["status"], properties: { status: { const: value } } });

export const OPENAPI_PATH = "/api/v1/openapi.json";

export const serviceArea: ApiArea = {
  tag: { name: "Service", description: "Health checks and this reference. No token needed." },
  paths: {
    "/healthz": {
      get: {
        operationId: "health",
        summary: "Liveness",
        description: "The API process is up.",
        tags: ["Service"],
        security: [],
        responses: { "200": { description: "Up.", content: { "application/json": { schema: status("ok") } } } },
      },
    },
    "/readyz": {
      get: {
        operationId: "ready",
        summary: "Readiness",
        description: "The rate limiter answers and serves: requests can be admitted.",
        tags: ["Service"],
        security: [],
        responses: {
          "200": { description: "Ready.", content: { "application/json": { schema: status("ready") } } },
          "503": { $ref: "#/components/responses/LimiterUnavailable" },
        },
      },
    },
    [OPENAPI_PATH]: {
      get: {
        operationId: "openApiDocument",
        summary: "This reference",
        description: "The OpenAPI 3.1 document of the HTTP API; rendered for people at /docs.",
        tags: ["Service"],
        security: [],
        responses: {
          "200": { description: "The document.", content: { "application/json": { schema: { type: "object" } } } },
        },
      },
    },
  },
};
