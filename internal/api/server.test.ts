// The HTTP front's own decisions, with the daemon's answers given: what a failure before and
// after admission looks like.
import { create } from "@bufbuild/protobuf";
import { expect, test } from "bun:test";
import { AdmitResponseSchema, Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { logger } from "../log/log";
import { apiMetrics, newRegistry } from "../metrics/metrics";
import { apiHandler, type ApiDeps } from "./server";

const admitted = create(AdmitResponseSchema, {
  verdict: Verdict.ALLOWED,
  orgId: "org_1",
  orgSlug: "acme",
  plan: Plan.PREMIUM,
  limit: 700,
  remaining: 699,
  resetSeconds: 1,
});
const failing = () => Promise.reject(new Error("daemon gone"));

test("a daemon call that fails after admission is a 503 that still carries the rate-limit headers", async () => {
  const deps: ApiDeps = {
    admit: async () => admitted,
    send: failing,
    getMessage: failing,
    webhooks: { create: failing, list: failing, delete: failing, deliveries: failing, test: failing, retry: failing },
    activity: new Proxy({}, { get: () => failing }) as ApiDeps["activity"],
    ready: async () => true,
    validateSend: failing,
    // Every audience call fails as the others do.
    audience: new Proxy({}, { get: () => failing }) as ApiDeps["audience"],
    automation: new Proxy({}, { get: () => failing }) as ApiDeps["automation"],
    audienceTimeoutMs: 1_000,
    trustProxy: [],
    docsUrl: undefined,
    log: logger("test"),
  };
  const handle = apiHandler(deps);
  for (const path of ["/api/v1/emails/msg_000000000000000000000000", "/api/v1/subscribers/ann@example.com"]) {
    const res = await handle(
      new Request(`http://api.test${path}`, { headers: { Authorization: `Bearer mc_${"a".repeat(43)}` } }),
      "127.0.0.1",
      "req_1",
    );
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ code: "LIMITER_UNAVAILABLE", message: expect.any(String) });
    expect(res.headers.get("Retry-After")).toBe("1");
    expect(res.headers.get("RateLimit")).toBe('"premium";r=699;t=1');
    expect(res.headers.get("RateLimit-Policy")).toBe('"premium";q=700;w=60');
  }
});

test("an admission the daemon cannot answer is a 503 LIMITER_UNAVAILABLE, counted as such", async () => {
  const registry = newRegistry("api");
  const deps = { admit: failing, log: logger("test") } as unknown as ApiDeps;
  const handle = apiHandler(deps, undefined, apiMetrics(registry));
  const res = await handle(new Request("http://api.test/api/v1/tags"), "127.0.0.1", "req_1");
  expect(res.status).toBe(503);
  expect(await res.json()).toMatchObject({ code: "LIMITER_UNAVAILABLE" });
  expect(await registry.metrics()).toContain('mailcore_admissions_unavailable_total{process="api"} 1');
});
