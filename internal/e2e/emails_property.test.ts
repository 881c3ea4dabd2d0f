// Property-based tests of the JSON API's send parser, alone and through the running API: any
// body is either a valid send or a 4xx naming what is wrong; never a crash, never a 5xx, and
// every 202 is a message that can be read back.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { isAllowedHeader, MAX_HEADER_VALUE } from "../mail/headers";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import { fuzzParams, reportFuzz } from "../testkit/fuzz";
import { type InProcess, startInProcess } from "../testkit/inprocess";
import { InvalidField } from "../api/invalid_field";
import { parseSendRequest } from "../api/send_request";
import { apiContracts } from "../api/contract";
import { MAILBOX } from "../api/openapi/message";

const repeat = (unit: string) => fc.integer({ min: 1, max: 400 }).map((n) => unit.repeat(n));
/** Inputs that broke parsers before: nesting, unclosed emphasis, comments, quotes, control characters. */
const hostile = fc.oneof(
  repeat("*a"),
  repeat(">"),
  repeat("("),
  repeat('"'),
  repeat("["),
  repeat("\\"),
  repeat("<"),
  repeat("\r\n"),
  repeat("\u0000"),
  repeat("😀"),
);
const text = fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), hostile);
const domain = fc.oneof(fc.constant("acme.example"), fc.domain());
const address = fc.oneof(
  fc.tuple(fc.stringMatching(/^[a-z0-9._+-]{1,20}$/), domain).map(([l, d]) => `${l}@${d}`),
  fc.tuple(text, fc.stringMatching(/^[a-z0-9]{1,10}$/)).map(([name, l]) => `${name} <${l}@acme.example>`),
  fc.emailAddress(),
  text,
);
const headerName = fc.oneof(
  fc.constantFrom(
    "X-Campaign",
    "List-Unsubscribe",
    "In-Reply-To",
    "Content-ID",
    "DKIM-Signature",
    "X-Mailcore-Tags",
    "Resent-Bcc",
    "From",
  ),
  fc.string({ maxLength: 80 }),
);
const anyJson = fc.jsonValue({ maxDepth: 3 });
const field = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: arb }, { weight: 1, arbitrary: anyJson });

const fieldValues: Record<string, fc.Arbitrary<unknown>> = {
  from: field(address),
  to: field(fc.oneof(address, fc.array(address, { maxLength: 2 }))),
  subject: field(text),
  text: field(text),
  html: field(text),
  markdown: field(text),
  replyTo: field(address),
  headers: field(fc.dictionary(headerName, text, { maxKeys: 4 })),
  tags: field(fc.array(fc.oneof(fc.stringMatching(/^[a-z0-9_-]{1,10}$/), text), { maxLength: 3 })),
  tracking: field(fc.record({ opens: fc.boolean(), clicks: fc.oneof(fc.boolean(), anyJson) }, { requiredKeys: [] })),
  lane: field(fc.constantFrom("transactional", "bulk", "priority")),
};
const generatedFields = fc.record(fieldValues, { requiredKeys: [] });
/** A valid send with up to two fields replaced: most stay valid, so the path past validation is reached too. */
const mutatedValid = fc
  .tuple(
    fc.stringMatching(/^[a-z0-9]{1,12}$/),
    fc
      .subarray(Object.keys(fieldValues), { maxLength: 2 })
      .chain((keys) => fc.record(Object.fromEntries(keys.map((k) => [k, fieldValues[k]!])))),
  )
  .map(([local, changes]) => ({
    from: "Acme <no-reply@acme.example>",
    to: `${local}@dest.example`,
    subject: "Hello",
    text: "Hi",
    ...changes,
  }));
/** Bodies shaped like a send (each field plausible, hostile or of the wrong type), or any JSON at all. */
const sendBody = fc.oneof(
  { weight: 5, arbitrary: mutatedValid },
  { weight: 4, arbitrary: generatedFields },
  { weight: 1, arbitrary: anyJson },
);

test("parseSendRequest: a valid send or an InvalidField, whatever the body", () => {
  const params = fuzzParams(1_000);
  fc.assert(
    fc.property(sendBody, (body) => {
      let input: ReturnType<typeof parseSendRequest>;
      try {
        input = parseSendRequest(body);
      } catch (err) {
        if (!(err instanceof InvalidField)) throw err;
        expect(typeof err.field).toBe("string");
        return;
      }
      const { email } = input;
      expect(email.fromAddress).toContain("@");
      expect(email.toAddress).toContain("@");
      expect(email.subject.trim()).not.toBe("");
      expect(email.subject).not.toMatch(/[\r\n]/);
      expect(email.html !== "" || email.text !== "").toBe(true);
      for (const [name, value] of Object.entries(email.headers)) {
        expect(isAllowedHeader(name)).toBe(true);
        expect(value.length).toBeLessThanOrEqual(MAX_HEADER_VALUE);
        expect(value).not.toMatch(/[\r\n]/);
      }
      expect(input.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    }),
    params,
  );
  reportFuzz("parseSendRequest", params);
});

/** Bodies the document's patterns admit: addresses and subjects drawn from them, any parts. */
const documentShaped = fc.record(
  {
    from: fc.stringMatching(new RegExp(MAILBOX.pattern as string, "u")),
    to: fc.stringMatching(new RegExp(MAILBOX.pattern as string, "u")),
    replyTo: fc.stringMatching(new RegExp(MAILBOX.pattern as string, "u")),
    subject: fc.stringMatching(/^[^\r\n]{0,20}\S[^\r\n]{0,20}$/),
    html: text,
    text,
    markdown: text,
    headers: fc.dictionary(
      fc.oneof(headerName, fc.stringMatching(/^[Xx]-[A-Za-z0-9-]{1,20}$/)),
      fc.stringMatching(/^[^\r\n]{0,40}$/),
      { maxKeys: 3 },
    ),
  },
  { requiredKeys: ["from", "to", "subject"] },
);

test("a send the OpenAPI document admits is never refused for its shape", () => {
  const send = apiContracts().get("POST /api/v1/emails")!;
  const params = fuzzParams(1_000);
  fc.assert(
    fc.property(fc.oneof(documentShaped, sendBody), (body) => {
      try {
        send.body(body);
      } catch (err) {
        if (err instanceof InvalidField) return; // refused by the document: the server refuses it too
        throw err;
      }
      parseSendRequest(body);
    }),
    params,
  );
  reportFuzz("document-admitted sends", params);
});

describe("POST /api/v1/emails with generated bodies (API and daemon in process, embedded store)", () => {
  let svc: InProcess;
  let store: EmbeddedHot;
  let token: string;
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 8));
  beforeAll(async () => {
    store = new EmbeddedHot(null);
    svc = await startInProcess(store, clock, { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: 60_000 });
    await svc.clients.directory.createOrganization({ slug: "acme", plan: Plan.ENTERPRISE });
    await svc.clients.directory.addDomain({ slug: "acme", domain: "acme.example", verified: true });
    token = (await svc.clients.directory.createToken({ slug: "acme" })).token;
  });
  afterAll(async () => {
    await svc?.stop();
    await store?.lifecycle.close();
  });

  test("no 5xx, and every 202 can be read back", async () => {
    const params = fuzzParams(150);
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        sendBody,
        fc.option(fc.string({ minLength: 1, maxLength: 40 }), { nil: undefined }),
        async (body, key) => {
          clock.advance(60_000); // the organization's quota refills; the rate limit is not under test here
          const res = await fetch(`${svc.apiUrl}/api/v1/emails`, {
            method: "POST",
            headers: {
              Authorization: `Bearer ${token}`,
              "Content-Type": "application/json",
              ...(key ? { "Idempotency-Key": key } : {}),
            },
            body: JSON.stringify(body),
          });
          const answer = (await res.json()) as Record<string, unknown>;
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          expect(res.status).toBeLessThan(500);
          if (res.status === 202) {
            const read = await fetch(`${svc.apiUrl}/api/v1/emails/${answer.id}`, {
              headers: { Authorization: `Bearer ${token}` },
            });
            expect(read.status).toBe(200);
            expect(((await read.json()) as { id: string }).id).toBe(answer.id as string);
          } else {
            expect(typeof answer.code === "string" || answer.message === "Too many requests").toBe(true);
          }
        },
      ),
      params,
    );
    reportFuzz(`POST /api/v1/emails (statuses ${JSON.stringify(Object.fromEntries(statuses))})`, params);
    expect(statuses.get(202) ?? 0).toBeGreaterThan(0); // the generator does reach valid sends
  }, 120_000);
});
