// Property-based test of the SMTP reply mapping: whatever the API answers (any status, any
// body, any headers) or fails to answer, the reply is a well-formed SMTP reply of the class the
// mapping in replies.ts gives (docs/smtp.md lists it), and 250 comes only with a queued message.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { fuzzParams, reportFuzz } from "../testkit/fuzz";
import { type ApiAnswer, apiReply, replyLine } from "./replies";

const headerValue = fc.option(
  fc.oneof(
    fc.string(),
    fc.nat().map(String),
    fc.date({ noInvalidDate: true }).map((d) => d.toUTCString()),
  ),
  { nil: undefined },
);
const answer: fc.Arbitrary<ApiAnswer> = fc.oneof(
  fc.record({
    kind: fc.constant("http" as const),
    status: fc.oneof(
      fc.constantFrom(200, 202, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 502, 503),
      fc.integer({ min: 100, max: 599 }),
    ),
    body: fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.record(
        {
          id: fc.oneof(fc.string(), fc.jsonValue()),
          code: fc.oneof(fc.string(), fc.constant("RECIPIENT_RATE_LIMITED")),
          message: fc.string(),
          field: fc.constantFrom("from", "to", "replyTo", "subject", ""),
        },
        { requiredKeys: [] },
      ),
    ),
    headers: fc.record({
      "retry-after": headerValue,
      "ratelimit-policy": headerValue,
      "ratelimit-remaining": headerValue,
      "idempotent-replayed": fc.option(fc.constantFrom("true", "false"), { nil: undefined }),
    }),
  }),
  fc.record({ kind: fc.constant("unreachable" as const), reason: fc.string() }),
  fc.record({ kind: fc.constant("timeout" as const), afterMs: fc.nat() }),
);

test("apiReply: a well-formed reply of the right class for any answer", () => {
  const params = fuzzParams(5_000);
  fc.assert(
    fc.property(answer, fc.boolean(), (a, keyed) => {
      const r = apiReply(a, Date.UTC(2026, 10, 22), keyed);
      expect([250, 451, 452, 535, 550, 552]).toContain(r.code);
      expect(r.status[0]).toBe(String(r.code)[0]);
      expect(r.status).toMatch(/^[245]\.\d{1,3}\.\d{1,3}$/);
      expect(r.text).not.toMatch(/[\x00-\x1f\x7f]/);
      expect(r.text.length).toBeLessThanOrEqual(400);
      expect(replyLine(r).length).toBeLessThan(512 - 6);
      const ok =
        a.kind === "http" &&
        a.status >= 200 &&
        a.status < 300 &&
        typeof (a.body as { id?: unknown } | null)?.id === "string" &&
        (a.body as { id: string }).id !== "";
      expect(r.code === 250).toBe(ok);
      if (r.code === 250) expect(r.messageId).toBe((a as { body: { id: string } }).body.id);
      if (a.kind === "http" && a.status >= 500) expect(r.code).toBe(451);
      if (a.kind !== "http")
        expect(r.text.includes("not queued twice")).toBe(
          keyed && !(a.kind === "unreachable" && a.reason === "connection refused"),
        );
    }),
    params,
  );
  reportFuzz("apiReply", params);
});
