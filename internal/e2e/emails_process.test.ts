// POST /api/v1/emails and GET /api/v1/emails/{id} over separate processes.
// Reads and plain sends go through the typed client, so a change of the API that breaks the
// client fails here; the tests of raw statuses and headers keep fetch.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MailcoreClient } from "../apiclient/client";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack } from "../testkit/testkit";

const LIMITED = { code: "RECIPIENT_RATE_LIMITED", message: "This recipient is temporarily rate limited." };
const mail = (to: string, extra: Record<string, unknown> = {}) => ({
  from: "Acme <no-reply@acme.example>",
  to,
  subject: "Your code",
  text: "123456",
  ...extra,
});

describe("two API processes and one daemon on Redis", () => {
  let redis: RedisServer;
  let stack: Stack;
  let token: string;
  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({ redisUrl: redis.url, apis: 2 });
    token = await stack.org("acme", "enterprise");
  });
  afterAll(async () => {
    await stack?.stop();
    await redis?.stop();
  });

  test("40 parallel sends to one mailbox: exactly 5 accepted", async () => {
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        sendEmail(stack.apiUrls[i % 2]!, token, mail(i % 3 ? "kim@example.org" : "Kim+x@Example.org")),
      ),
    );
    const accepted = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status === 429);
    expect(accepted).toHaveLength(5);
    expect(refused).toHaveLength(35);
    for (const r of refused) {
      expect(r.body).toEqual(LIMITED);
      expect(r.headers.get("Retry-After")).toBe("600");
    }
    // Each accepted send is queued, readable from either API process.
    for (const [i, a] of accepted.entries()) {
      const api = new MailcoreClient({ baseUrl: stack.apiUrls[i % 2]!, token });
      const { data, error, response } = await api.call("getEmail", { path: { id: a.body.id as string } });
      expect(error).toBeUndefined();
      expect(response.status).toBe(200);
      expect(data).toMatchObject({
        id: a.body.id,
        lane: "transactional",
        status: "queued",
        to: expect.stringMatching(/kim/i),
        attempts: 0,
      });
    }
  });

  test("Idempotency-Key: same body replays the answer, another body is 409", async () => {
    const key = { "Idempotency-Key": "order-4711-receipt" };
    const first = await sendEmail(stack.apiUrls[0]!, token, mail("lee@example.org"), key);
    expect(first.status).toBe(202);
    const again = await sendEmail(stack.apiUrls[1]!, token, mail("lee@example.org"), key);
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("Idempotent-Replayed")).toBe("true");
    const other = await sendEmail(stack.apiUrls[0]!, token, mail("lee@example.org", { text: "654321" }), key);
    expect(other.status).toBe(409);
    expect(other.body.code).toBe("IDEMPOTENCY_KEY_REUSED");
    const bad = await sendEmail(stack.apiUrls[0]!, token, mail("lee@example.org"), {
      "Idempotency-Key": "x".repeat(256),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("INVALID_IDEMPOTENCY_KEY");
  });
});

describe("bad input (embedded store)", () => {
  let stack: Stack;
  let token: string;
  let other: string;
  beforeAll(async () => {
    stack = await startStack();
    token = await stack.org("acme", "premium");
    other = await stack.org("globex", "premium");
    await stack.admin("domain", "add", "acme", "unverified.example");
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const post = (body: string | Uint8Array, headers: Record<string, string>) =>
    fetch(`${stack.apiUrls[0]}/api/v1/emails`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, ...headers },
      body,
    });

  test.each([
    ["no JSON content type", "{}", { "Content-Type": "text/plain" }, 415, "UNSUPPORTED_MEDIA_TYPE"],
    ["broken JSON", "{", { "Content-Type": "application/json" }, 400, "INVALID_JSON"],
    [
      "non-UTF-8 bytes",
      new Uint8Array([0x7b, 0xff, 0x7d]),
      { "Content-Type": "application/json" },
      400,
      "INVALID_JSON",
    ],
    [
      "a field error",
      JSON.stringify(mail("not-an-address")),
      { "Content-Type": "application/json" },
      422,
      "VALIDATION_FAILED",
    ],
  ] as const)("%s", async (_, body, headers, status, code) => {
    const res = await post(body as string | Uint8Array, headers);
    expect(res.status).toBe(status);
    expect(((await res.json()) as { code: string }).code).toBe(code);
    expect(res.headers.get("RateLimit-Policy")).toBe('"premium";q=700;w=60');
  });

  test("a body of 1 MB + 1 byte is 413; exactly 1 MB is not", async () => {
    const envelope = JSON.stringify(mail("a@example.org", { text: "" }));
    const fill = (size: number) => envelope.replace('"text":""', `"text":"${"x".repeat(size - envelope.length)}"`);
    const over = await post(fill(1024 * 1024 + 1), { "Content-Type": "application/json" });
    expect(over.status).toBe(413);
    expect(((await over.json()) as { code: string }).code).toBe("PAYLOAD_TOO_LARGE");
    const at = await post(fill(1024 * 1024), { "Content-Type": "application/json" });
    expect(at.status).toBe(202);
  });

  test("a From domain that is not verified for the organization is 403", async () => {
    const api = new MailcoreClient({ baseUrl: stack.apiUrls[0]!, token });
    for (const from of ["x@unverified.example", "x@globex.example", "x@elsewhere.example"]) {
      const { error } = await api.call("sendEmail", { body: mail("a@example.org", { from }) });
      expect(error?.status).toBe(403);
      expect(error?.code).toBe("DOMAIN_NOT_VERIFIED");
    }
  });

  test("a message is visible to its own organization only", async () => {
    const ours = new MailcoreClient({ baseUrl: stack.apiUrls[0]!, token });
    const theirs = new MailcoreClient({ baseUrl: stack.apiUrls[0]!, token: other });
    const sent = await ours.call("sendEmail", { body: mail("b@example.org") });
    const id = sent.data!.id;
    expect((await ours.call("getEmail", { path: { id } })).response.status).toBe(200);
    expect((await theirs.call("getEmail", { path: { id } })).error).toMatchObject({ status: 404, code: "NOT_FOUND" });
    const unknown = await ours.call("getEmail", { path: { id: "msg_000000000000000000000000" } });
    expect(unknown.error?.status).toBe(404);
    // A path that leaves the route: fetch, since the client encodes the slashes.
    const res = await fetch(`${stack.apiUrls[0]}/api/v1/emails/../../etc`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(404);
  });
});
