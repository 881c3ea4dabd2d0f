// The HTTP front's own decisions, with the daemon's answers given: what a failure before and
// after admission looks like.
import { DomainService } from "../gen/mailcore/limiter/v1/domains_pb";
import { create, type DescService } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, test } from "bun:test";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { AdmitResponseSchema, Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { logger } from "../log/log";
import { apiMetrics, newRegistry } from "../metrics/metrics";
import type { AdmissionPort, ApiPorts } from "./ports";
import { type ApiOptions, apiHandler, bearerToken, refusedAdmission } from "./server";

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
/** A client of a daemon that serves nothing: every call fails (Unimplemented). */
const failingClient = <S extends DescService>(service: S) =>
  createClient(
    service,
    createRouterTransport(() => {}),
  );

/** Ports whose every call to the daemon fails, but for the admission given. */
function failingPorts(admit: AdmissionPort["admit"]): ApiPorts {
  return {
    admission: { admit },
    health: { ready: async () => true },
    mail: { send: failing, getMessage: failing },
    activity: failingClient(MailService),
    webhooks: { create: failing, list: failing, delete: failing, deliveries: failing, test: failing, retry: failing },
    audience: failingClient(AudienceService),
    automation: failingClient(AutomationService),
    domains: failingClient(DomainService),
    suppressions: failingClient(SuppressionService),
    validation: { validate: failing },
  };
}
const options: ApiOptions = { trustProxy: [], docsUrl: undefined, recordsTimeoutMs: 1_000, log: logger("test") };

test("a daemon call that fails after admission is a 503 that still carries the rate-limit headers", async () => {
  const handle = apiHandler(
    failingPorts(async () => admitted),
    options,
  );
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
  const handle = apiHandler(failingPorts(failing), { ...options, metrics: apiMetrics(registry) });
  const res = await handle(new Request("http://api.test/api/v1/tags"), "127.0.0.1", "req_1");
  expect(res.status).toBe(503);
  expect(await res.json()).toMatchObject({ code: "LIMITER_UNAVAILABLE" });
  expect(await registry.metrics()).toContain('mailcore_admissions_unavailable_total{process="api"} 1');
});

test("the Authorization header: a well-formed bearer token is asked for; anything else is asked for as no token", () => {
  const token = `mc_${"a".repeat(43)}`;
  expect(bearerToken(`Bearer ${token}`)).toEqual({ token, isBearer: true });
  expect(bearerToken(`bearer   ${token} `)).toEqual({ token, isBearer: true });
  expect(bearerToken("Bearer not-a-token")).toEqual({ token: "", isBearer: true });
  expect(bearerToken(`Basic ${token}`)).toEqual({ token: "", isBearer: false });
  expect(bearerToken(null)).toEqual({ token: "", isBearer: false });
});

describe("an admission that does not allow the request", () => {
  const log = logger("test");
  const refusal = (verdict: Verdict, authorization: string | null) => {
    let askedForDocs = false;
    const docsUrl = () => {
      askedForDocs = true;
      return "https://docs.test/rate-limits";
    };
    const admission = create(AdmitResponseSchema, { ...admitted, verdict, retryAfterSeconds: 7 });
    return { res: refusedAdmission(admission, authorization, { RateLimit: "r" }, docsUrl, log), askedForDocs };
  };

  test("allowed: no answer, and the docs link is not worked out", () => {
    expect(refusal(Verdict.ALLOWED, null)).toEqual({ res: undefined, askedForDocs: false });
  });

  test("limited (the organization or the address): 429 with Retry-After and the docs link", async () => {
    for (const verdict of [Verdict.ORG_LIMITED, Verdict.IP_LIMITED]) {
      const { res } = refusal(verdict, null);
      expect(res!.status).toBe(429);
      expect(res!.headers.get("Retry-After")).toBe("7");
      expect(res!.headers.get("RateLimit")).toBe("r");
      expect(await res!.json()).toEqual({ message: "Too many requests", docs: "https://docs.test/rate-limits" });
    }
  });

  test("unauthenticated: 401 with a challenge, saying what was wrong with the header", async () => {
    const codes = [];
    for (const authorization of [null, "Basic dXNlcjpwYXNz", `Bearer mc_${"b".repeat(43)}`]) {
      const { res } = refusal(Verdict.UNAUTHENTICATED, authorization);
      expect(res!.status).toBe(401);
      expect(res!.headers.get("WWW-Authenticate")).toBe('Bearer realm="api"');
      codes.push(((await res!.json()) as { code: string }).code);
    }
    expect(codes).toEqual(["MISSING_TOKEN", "INVALID_AUTHORIZATION", "INVALID_TOKEN"]);
  });

  test("a verdict the front does not know: 503, as if the daemon could not be asked", async () => {
    const { res } = refusal(99 as Verdict, null);
    expect(res!.status).toBe(503);
    expect(await res!.json()).toMatchObject({ code: "LIMITER_UNAVAILABLE" });
  });
});
