// The HTTP front's own decisions, with the daemon's answers given: what a failure after
// admission looks like.
import { create } from "@bufbuild/protobuf";
import { expect, test } from "bun:test";
import { AdmitResponseSchema, Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { logger } from "../log/log";
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
    webhooks: { create: failing, list: failing, delete: failing, deliveries: failing },
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
