// The OpenAPI document against the server that serves it: every route the server answers is
// documented, every documented operation answers with a documented status, and the document
// passes the linter CI runs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../clock/clock";
import { Plan } from "../../gen/mailcore/limiter/v1/limiter_pb";
import { EmbeddedHot } from "../../hotstore/embedded/embedded";
import { type InProcess, startInProcess } from "../../testkit/inprocess";
import { pythonValidate } from "../../testkit/pyschema";
import { runToEnd } from "../../testkit/testkit";
import { documentRef, documentValidator } from "../contract";
import { ROUTES } from "../routes";
import { openApiDocument } from "./document";

type Obj = Record<string, unknown>;
const doc = openApiDocument() as { paths: Record<string, Record<string, Obj>> };
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** The documented operations, with a concrete path (path parameters filled with their examples). */
const operations = Object.entries(doc.paths).flatMap(([template, item]) =>
  Object.entries(item).map(([method, op]) => {
    const params = (op.parameters as Obj[] | undefined) ?? [];
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
      const p = params.find((x) => x.in === "path" && x.name === name);
      if (!p?.example) throw new Error(`${method} ${template}: path parameter ${name} has no example`);
      return String(p.example);
    });
    return { template, method: method.toUpperCase(), path, op };
  }),
);

/** The paths the front answers before routing (and without admission), besides its route table. */
const FIXED = ["/healthz", "/readyz", "/api/v1/openapi.json"];

describe("the OpenAPI document and the server", () => {
  let app: InProcess;
  let token: string;
  beforeAll(async () => {
    app = await startInProcess(new EmbeddedHot(null), new ManualClock(), {
      maxAttempts: 3,
      retryBaseMs: 1_000,
      bounceCooldownMs: 60_000,
    });
    await app.clients.directory.createOrganization({ slug: "doc", plan: Plan.PREMIUM });
    token = (await app.clients.directory.createToken({ slug: "doc" })).token;
  });
  afterAll(async () => {
    await app?.stop();
  });

  test("every route the server answers is documented, with the same methods", () => {
    const routes = ROUTES;
    expect(routes.length).toBeGreaterThan(0);
    for (const { pattern, methods } of routes) {
      // An operation is served by the first route that matches its path (/subscribers/batch before /subscribers/{id}).
      const documented = operations.filter((o) => routes.find((r) => r.pattern.test(o.path))?.pattern === pattern);
      expect({ route: String(pattern), methods: documented.map((o) => o.method).sort() }).toEqual({
        route: String(pattern),
        methods: [...methods].sort(),
      });
    }
    for (const path of FIXED) expect(operations.some((o) => o.path === path)).toBe(true);
  });

  test("every documented operation answers, with a status it documents", async () => {
    expect(operations.length).toBeGreaterThanOrEqual(6);
    for (const { method, path, op, template } of operations) {
      const res = await fetch(`${app.apiUrl}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          ...(op.requestBody ? { "Content-Type": "application/json" } : {}),
        },
        body: op.requestBody ? "{}" : undefined,
      });
      const body = await res.text();
      expect({
        op: `${method} ${template}`,
        status: String(res.status),
        documented: Object.keys(op.responses as Obj),
      }).toEqual({
        op: `${method} ${template}`,
        status: String(res.status),
        documented: expect.arrayContaining([String(res.status)]),
      });
      expect(body).not.toContain("No such endpoint");
      // An /api/v1 operation that takes a token answers with the rate-limit headers it documents.
      const secured = !(Array.isArray(op.security) && op.security.length === 0);
      if (secured) expect(res.headers.get("RateLimit-Policy")).toBe('"premium";q=700;w=60');
    }
  });

  test("what is not documented is not answered: other methods get 405 with Allow, other paths 404", async () => {
    const served = Object.keys(doc.paths).map((template) => ({
      path: operations.find((o) => o.template === template)!.path,
      methods: METHODS.filter((m) => doc.paths[template]![m.toLowerCase()]),
    }));
    // The pages beside the API are GET alone too.
    for (const path of ["/docs", "/docs/rate-limits"]) served.push({ path, methods: ["GET"] });
    for (const { path, methods } of served) {
      const allow = methods.flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m])).sort();
      for (const method of [...METHODS, "OPTIONS", "TRACE"].filter((m) => !methods.includes(m))) {
        const res = await fetch(`${app.apiUrl}${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
        expect({
          op: `${method} ${path}`,
          status: res.status,
          allow: res.headers.get("Allow")?.split(", ").sort(),
        }).toEqual({
          op: `${method} ${path}`,
          status: 405,
          allow,
        });
      }
    }
    for (const path of ["/api/v1", "/api/v1/nothing", "/api/v2/tags", "/api/v1/emails/msg_1/events"]) {
      const res = await fetch(`${app.apiUrl}${path}`, { headers: { Authorization: `Bearer ${token}` } });
      expect({ path, status: res.status, code: ((await res.json()) as Obj).code }).toEqual({
        path,
        status: 404,
        code: "NOT_FOUND",
      });
    }
  });

  test("HEAD is served wherever GET is: the same status and headers, no body", async () => {
    const paths = [...operations.filter((o) => o.method === "GET").map((o) => o.path), "/docs", "/docs/rate-limits"];
    for (const path of paths) {
      const ask = (method: string) =>
        fetch(`${app.apiUrl}${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
      const got = await ask("GET");
      await got.arrayBuffer();
      const head = await ask("HEAD");
      const same = (res: Response) => ({
        path,
        status: res.status,
        type: res.headers.get("Content-Type"),
        length: res.headers.get("Content-Length"),
        policy: res.headers.get("RateLimit-Policy"),
      });
      expect(same(head)).toEqual(same(got));
      expect(await head.text()).toBe("");
    }
  });

  test("what the document refuses the server refuses, 422 naming the field: the fuzzer's findings", async () => {
    const send = { from: "a@doc.example", to: "b@doc.example", subject: "Hi", text: "t" };
    const message = { from: "a@doc.example", subject: "Hi", text: "t" };
    const workflow = { name: "w", trigger: { type: "subscriber.created" }, steps: [] };
    const campaign = { name: "c", ...message, audience: { all: true } };
    const cases: [string, string, unknown, string][] = [
      ["POST", "/api/v1/subscribers", { email: "a@doc.example", triggerWorkflows: null }, "triggerWorkflows"],
      [
        "POST",
        "/api/v1/subscribers/batch",
        { subscribers: [{ email: "a@doc.example" }], triggerWorkflows: null },
        "triggerWorkflows",
      ],
      [
        "POST",
        "/api/v1/workflows",
        { ...workflow, trigger: { type: "subscriber.created", extra: 1 } },
        "trigger.extra",
      ],
      // A discriminated shape that is not an object at all (Ajv applies a discriminator to objects only).
      ["POST", "/api/v1/workflows", { ...workflow, trigger: "subscriber.created" }, "trigger"],
      ["POST", "/api/v1/workflows", { ...workflow, steps: ["wait"] }, "steps[0]"],
      // A URL WHATWG parsing refuses: no host, a numeric last label, user info.
      ["POST", "/api/v1/webhooks", { url: "HTTP://", events: ["email.queued"] }, "url"],
      ["POST", "/api/v1/webhooks", { url: "https://hooks.1/x", events: ["email.queued"] }, "url"],
      [
        "POST",
        "/api/v1/workflows",
        { ...workflow, steps: [{ type: "webhook", url: "https://a:b@x.example" }] },
        "steps[0].url",
      ],
      ["GET", "/api/v1/webhooks?cursor=", undefined, "cursor"],
      ["GET", "/api/v1/subscribers?cursor=", undefined, "cursor"],
      ["GET", "/api/v1/campaigns?cursor=a.b", undefined, "cursor"],
      ["GET", "/api/v1/subscribers?limit=0", undefined, "limit"],
      ["GET", "/api/v1/emails/msg_1", undefined, "id"],
      ["POST", "/api/v1/emails", { ...send, from: "nobody" }, "from"],
      ["POST", "/api/v1/emails", { ...send, to: "nobody" }, "to"],
      ["POST", "/api/v1/emails", { ...send, text: undefined }, "html"],
      ["POST", "/api/v1/emails", { ...send, text: "" }, "html"],
      ["POST", "/api/v1/emails", { ...send, subject: " " }, "subject"],
      ["POST", "/api/v1/emails", { ...send, html: "<p>x</p>", markdown: "x" }, "markdown"],
      ["POST", "/api/v1/emails", { ...send, headers: { From: "x" } }, "headers.From"],
      ["POST", "/api/v1/campaigns", { ...campaign, subject: "" }, "subject"],
      ["POST", "/api/v1/campaigns", { ...campaign, from: "nobody" }, "from"],
      ["POST", "/api/v1/campaigns", { ...campaign, text: undefined }, "html"],
      [
        "POST",
        "/api/v1/workflows",
        { ...workflow, steps: [{ type: "email", ...message, from: "x" }] },
        "steps[0].from",
      ],
      [
        "POST",
        "/api/v1/workflows",
        { ...workflow, steps: [{ type: "email", ...message, subject: "" }] },
        "steps[0].subject",
      ],
      ["POST", "/api/v1/workflows", { ...workflow, steps: [{ type: "email", ...message, text: "" }] }, "steps[0].html"],
      [
        "POST",
        "/api/v1/workflows",
        { ...workflow, steps: [{ type: "webhook", url: "ftp://x.example" }] },
        "steps[0].url",
      ],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await fetch(`${app.apiUrl}${path}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const answer = (await res.json()) as Obj;
      expect({ path, body, status: res.status, code: answer.code, field: answer.field }).toEqual({
        path,
        body,
        status: 422,
        code: "VALIDATION_FAILED",
        field,
      });
    }
  });

  // The rule is one neither a schema nor the other parameter's states: the operation's description
  // says it, and the server answers it, validated by both engines against the answer's schema.
  test("delivery figures from a since in the future: as the document says, an empty series; with until, zeros", async () => {
    const op = doc.paths["/api/v1/stats/emails"]!.get!;
    expect(op.description).toContain(
      "A `since` later than now without `until` is a range that has not begun: 200 with no intervals (`data` empty, `until` equal to `since`).",
    );
    const at = ["paths", "/api/v1/stats/emails", "get", "responses", "200", "content", "application/json", "schema"];
    const validate = documentValidator(doc, false).compile(documentRef(...at));
    const get = async (query: string) => {
      const res = await fetch(`${app.apiUrl}/api/v1/stats/emails?${query}`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      return { status: res.status, body: (await res.json()) as Obj };
    };
    const DAY = 86_400_000;
    const tomorrow = new Date(Math.floor(Date.now() / DAY) * DAY + DAY + 3_600_000).toISOString();
    const later = (ms: number) => new Date(Date.parse(tomorrow) + ms).toISOString();
    const q = (o: Record<string, string>) => new URLSearchParams(o).toString();
    const empty = await get(q({ since: tomorrow, interval: "day" }));
    expect(empty).toEqual({
      status: 200,
      body: {
        interval: "day",
        since: `${tomorrow.slice(0, 10)}T00:00:00.000Z`,
        until: `${tomorrow.slice(0, 10)}T00:00:00.000Z`,
        complaintRate: 0,
        data: [],
      },
    });
    const hourly = await get(q({ since: tomorrow }));
    expect(hourly.body).toMatchObject({ interval: "hour", since: tomorrow, until: tomorrow, data: [] });
    const zeros = await get(q({ since: tomorrow, until: later(2 * DAY), interval: "day" }));
    expect(zeros.status).toBe(200);
    expect((zeros.body.data as Obj[]).map((r) => r.accepted)).toEqual([0, 0, 0]);
    for (const answer of [empty, hourly, zeros]) expect(validate(answer.body)).toBe(true);
    const python = await pythonValidate(
      doc,
      [empty, hourly, zeros].map((a) => ({ at, value: a.body })),
    );
    expect(python).toEqual([[], [], []]);
    // An until given before the since is still refused, as the 422 says.
    expect(await get(q({ since: tomorrow, until: new Date().toISOString() }))).toMatchObject({
      status: 422,
      body: { field: "until" },
    });
    expect((op.responses as Record<string, Obj>)["422"]!.description).toContain("a given `until` is not after `since`");
  });

  test("served at /api/v1/openapi.json as OpenAPI 3.1, without a token", async () => {
    const res = await fetch(`${app.apiUrl}/api/v1/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
  });
});

test("the linter CI runs (Redocly CLI, recommended-strict) passes the document", async () => {
  const r = await runToEnd("internal/api/openapi/lint.ts", [], {});
  expect(r.stderr + r.stdout).toContain("Your API description is valid");
  expect(r.code).toBe(0);
  // The linter is a separate Node process that loads Redocly's rules: 2 to 3 s alone, over 9 s on a busy machine.
}, 60_000);

test("an address an upsert admits is one its subscriber is answered with, trimmed and lower-cased", () => {
  const ajv = documentValidator(doc, false);
  const email = (schema: string) => ajv.compile(documentRef("components", "schemas", schema, "properties", "email"));
  const [admitted, answered] = [email("SubscriberUpsert"), email("Subscriber")];
  // UTF-8 the answer's schema refused (format email is ASCII), and a local part lower-casing lengthens.
  for (const address of [
    " Ann@Example.COM ",
    "jörg@bücher.example",
    "Ünal@ÖRNEK.example",
    `${"İ".repeat(64)}@x.example`,
  ]) {
    expect({ address, admitted: admitted(address) }).toEqual({ address, admitted: true });
    const kept = address.trim().toLowerCase();
    expect({ kept, answered: answered(kept) }).toEqual({ kept, answered: true });
  }
});
