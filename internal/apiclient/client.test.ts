// The client's retries, Idempotency-Key and errors, against a fake API: a Bun.serve that
// answers from a script of answers and records what it was sent.
import { afterAll, beforeEach, expect, test } from "bun:test";
import { MailcoreClient, MailcoreError } from "./client";

interface Seen {
  method: string;
  url: string;
  headers: Headers;
  body: string;
}

let seen: Seen[] = [];
let answers: (() => Response)[] = [];
const server = Bun.serve({
  port: 0,
  async fetch(req) {
    seen.push({ method: req.method, url: req.url, headers: req.headers, body: await req.text() });
    return answers.shift()?.() ?? Response.json({ code: "NO_ANSWER", message: "the test gave none" }, { status: 500 });
  },
});
afterAll(() => server.stop(true));
beforeEach(() => {
  seen = [];
  answers = [];
});

const baseUrl = `http://127.0.0.1:${server.port}/`;
const client = (options: { maxAttempts?: number; maxRetryAfterSeconds?: number } = {}) =>
  new MailcoreClient({ baseUrl, token: "mc_test", ...options });
const mail = { from: "a@acme.example", to: "b@example.org", subject: "Hi", text: "Hello" };
const queued = { id: "msg_5f1d2c3b4a5968778695a4b3", status: "queued", lane: "transactional" };
const answer =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  () =>
    Response.json(body, { status, headers });
const unavailable = answer(503, { code: "LIMITER_UNAVAILABLE", message: "Retry shortly." }, { "Retry-After": "0" });

test("a send carries a generated Idempotency-Key, the token and the JSON body; the data is the answer's", async () => {
  answers.push(answer(202, queued), answer(202, queued));
  const first = await client().call("sendEmail", { body: mail });
  expect(first.error).toBeUndefined();
  expect(first.data).toEqual(queued as typeof first.data);
  expect(first.response.status).toBe(202);
  await client().call("sendEmail", { body: mail });
  const [a, b] = seen;
  expect(a!.method).toBe("POST");
  expect(a!.url).toBe(`${baseUrl}api/v1/emails`);
  expect(a!.headers.get("Authorization")).toBe("Bearer mc_test");
  expect(a!.headers.get("Content-Type")).toBe("application/json");
  expect(JSON.parse(a!.body)).toEqual(mail);
  expect(a!.headers.get("Idempotency-Key")).toMatch(/^[\x21-\x7e]{1,255}$/);
  expect(b!.headers.get("Idempotency-Key")).not.toBe(a!.headers.get("Idempotency-Key"));
});

test("a given Idempotency-Key is sent as it is; operations without one get none", async () => {
  answers.push(answer(202, queued), answer(200, { data: [] }));
  await client().call("sendEmail", { body: mail, header: { "Idempotency-Key": "order-4711" } });
  await client().call("listTags");
  expect(seen.map((s) => s.headers.get("Idempotency-Key"))).toEqual(["order-4711", null]);
});

test("429: retried after Retry-After with the same key and body", async () => {
  answers.push(answer(429, { message: "Too many requests", docs: "/docs/rate-limits" }, { "Retry-After": "1" }));
  answers.push(answer(202, queued));
  const started = performance.now();
  const { data, error } = await client().call("sendEmail", { body: mail });
  expect(performance.now() - started).toBeGreaterThanOrEqual(990);
  expect(error).toBeUndefined();
  expect(data?.id).toBe(queued.id);
  expect(seen).toHaveLength(2);
  expect(seen[1]!.headers.get("Idempotency-Key")).toBe(seen[0]!.headers.get("Idempotency-Key"));
  expect(seen[1]!.body).toBe(seen[0]!.body);
});

test("503: retried with the same key up to maxAttempts, then the error as a value", async () => {
  answers.push(unavailable, unavailable, unavailable, unavailable);
  const { data, error, response } = await client({ maxAttempts: 3 }).call("sendEmail", { body: mail });
  expect(data).toBeUndefined();
  expect(seen).toHaveLength(3);
  expect(new Set(seen.map((s) => s.headers.get("Idempotency-Key"))).size).toBe(1);
  expect(response.status).toBe(503);
  expect(error).toBeInstanceOf(MailcoreError);
  expect(error).toMatchObject({
    status: 503,
    code: "LIMITER_UNAVAILABLE",
    retryAfter: 0,
    body: { code: "LIMITER_UNAVAILABLE", message: "Retry shortly." },
  });
});

test("a Retry-After longer than maxRetryAfterSeconds is returned at once, with its seconds", async () => {
  const limited = { code: "RECIPIENT_RATE_LIMITED", message: "This recipient is temporarily rate limited." };
  answers.push(answer(429, limited, { "Retry-After": "600" }));
  const { error } = await client({ maxRetryAfterSeconds: 60 }).call("sendEmail", { body: mail });
  expect(seen).toHaveLength(1);
  expect(error).toMatchObject({ status: 429, code: "RECIPIENT_RATE_LIMITED", retryAfter: 600, body: limited });
});

test("other errors are not retried; an answer without a code is HTTP_<status>", async () => {
  answers.push(answer(422, { code: "VALIDATION_FAILED", message: "bad", field: "to" }));
  answers.push(answer(429, { message: "Too many requests", docs: "/docs/rate-limits" }));
  answers.push(() => new Response("<html>bad gateway</html>", { status: 502 }));
  const invalid = await client().call("sendEmail", { body: mail });
  expect(invalid.error).toMatchObject({ status: 422, code: "VALIDATION_FAILED", body: { field: "to" } });
  const quota = await client({ maxAttempts: 1 }).call("listTags");
  expect(quota.error).toMatchObject({ status: 429, code: "HTTP_429", retryAfter: undefined });
  const proxy = await client().call("health");
  expect(proxy.error).toMatchObject({ status: 502, code: "HTTP_502", body: "<html>bad gateway</html>" });
  expect(proxy.error?.message).toBe("502 HTTP_502");
  expect(seen).toHaveLength(3);
});

test("path parameters are encoded, query parameters sent, a 204 has no data", async () => {
  answers.push(answer(200, { data: [], nextCursor: null }), () => new Response(null, { status: 204 }));
  await client().call("listSubscriberEvents", {
    path: { id: "kim@x.example" },
    query: { limit: 3, cursor: undefined },
  });
  const deleted = await client().call("deleteTag", { path: { name: "Spring sale" } });
  expect(seen.map((s) => `${s.method} ${s.url.slice(baseUrl.length - 1)}`)).toEqual([
    "GET /api/v1/subscribers/kim%40x.example/events?limit=3",
    "DELETE /api/v1/tags/Spring%20sale",
  ]);
  expect(deleted).toMatchObject({ data: undefined, error: undefined });
});
