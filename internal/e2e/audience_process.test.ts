// The audience endpoints end to end: limiterd, an API process and a worker, each started with
// `bun run`, on the embedded store, over real HTTP. The subscriber calls go through the typed
// client where the test reads answers; the tests of raw statuses, headers and malformed input
// keep fetch.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MailcoreClient, type RequestInput } from "../apiclient/client";
import { type Stack, startStack, waitFor } from "../testkit/testkit";

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

type Json = Record<string, unknown>;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1 });
}, 30_000);
afterAll(async () => {
  await stack?.stop();
});

/** A client of one organization's token: raw calls, and the typed client as `typed`. */
function client(token: string) {
  const typed = new MailcoreClient({ baseUrl: stack.apiUrls[0]!, token });
  const call = async (method: string, path: string, body?: unknown, raw?: string): Promise<Answer> => {
    const res = await fetch(`${stack.apiUrls[0]}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body !== undefined || raw !== undefined ? { "Content-Type": "application/json" } : {}),
      },
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
  };
  return {
    call,
    typed,
    get: (path: string) => call("GET", path),
    post: (path: string, body: unknown) => call("POST", path, body),
    events: async (ref: string) => {
      const { data, error } = await typed.call("listSubscriberEvents", { path: { id: ref }, query: { limit: 100 } });
      if (error) throw error;
      return data.data.map((e): string => e.type);
    },
  };
}

describe("subscribers through the API", () => {
  let api: ReturnType<typeof client>;
  beforeAll(async () => {
    api = client(await stack.org("aud", "enterprise"));
  });

  test("upsert: 201 created, 200 updated, an identical upsert changes nothing; read by id, email, percent-encoded email", async () => {
    const made = await api.post("/api/v1/subscribers", {
      email: " Kim@Aud.Example ",
      name: "Kim",
      fields: { plan: "pro", seats: 2, beta: true, ref: null },
      tags: ["vip"],
    });
    expect(made.status).toBe(201);
    expect(made.headers.get("RateLimit-Policy")).toBe('"enterprise";q=2000;w=60');
    expect(made.body).toEqual({
      id: expect.stringMatching(/^sub_[0-9a-f]{24}$/),
      email: "kim@aud.example",
      name: "Kim",
      status: "subscribed",
      fields: { plan: "pro", seats: 2, beta: true, ref: null },
      tags: ["vip"],
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const same = await api.post("/api/v1/subscribers", { email: "kim@aud.example", name: "Kim", tags: ["vip"] });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(made.body);
    expect(await api.events("kim@aud.example")).toEqual(["tag.added", "subscriber.created"]);
    const changed = await api.post("/api/v1/subscribers", {
      email: "KIM@aud.example",
      fields: { seats: 3 },
      tags: ["new"],
      replaceTags: true,
      triggerWorkflows: false,
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ id: made.body.id, fields: { plan: "pro", seats: 3 }, tags: ["new"] });
    for (const ref of [
      made.body.id as string,
      "kim@aud.example",
      "KIM%40aud.example",
      encodeURIComponent("Kim@Aud.example"),
    ]) {
      const read = await api.get(`/api/v1/subscribers/${ref}`);
      expect({ ref, status: read.status, id: read.body.id }).toEqual({ ref, status: 200, id: made.body.id });
    }
    const events = await api.get(`/api/v1/subscribers/${made.body.id}/events?limit=3`);
    expect(events.body.data).toEqual([
      { type: "tag.removed", at: expect.any(String), data: { tag: "vip" }, triggerWorkflows: false },
      { type: "tag.added", at: expect.any(String), data: { tag: "new" }, triggerWorkflows: false },
      {
        type: "subscriber.updated",
        at: expect.any(String),
        data: { changed: ["fields.seats"] },
        triggerWorkflows: false,
      },
    ]);
    const rest = await api.get(`/api/v1/subscribers/${made.body.id}/events?limit=3&cursor=${events.body.nextCursor}`);
    expect((rest.body.data as Json[]).map((e) => e.type)).toEqual(["tag.added", "subscriber.created"]);
    expect(rest.body.nextCursor).toBeNull();
  });

  test("PATCH, tags added and removed, unsubscribe and resubscribe, DELETE", async () => {
    const { typed } = api;
    const { data: made } = await typed.call("upsertSubscriber", { body: { email: "pat@aud.example" } });
    const id = made!.id;
    const path = `/api/v1/subscribers/${id}`;
    expect(
      (await typed.call("updateSubscriber", { path: { id }, body: { name: "Pat", status: "unsubscribed" } })).data,
    ).toMatchObject({ name: "Pat", status: "unsubscribed" });
    expect(
      (await typed.call("upsertSubscriber", { body: { email: "pat@aud.example", status: "subscribed" } })).data,
    ).toMatchObject({ status: "unsubscribed" });
    expect(
      (await typed.call("upsertSubscriber", { body: { email: "pat@aud.example", resubscribe: true } })).data,
    ).toMatchObject({ status: "subscribed" });
    expect((await typed.call("addSubscriberTags", { path: { id }, body: { tags: ["a", "b c"] } })).data).toMatchObject({
      tags: ["a", "b c"],
    });
    expect((await typed.call("removeSubscriberTags", { path: { id }, body: { tags: ["a"] } })).data).toMatchObject({
      tags: ["b c"],
    });
    expect(await api.events(id)).toEqual([
      "tag.removed",
      "tag.added",
      "tag.added",
      "subscriber.resubscribed",
      "subscriber.unsubscribed",
      "subscriber.updated",
      "subscriber.created",
    ]);
    expect((await api.call("PATCH", path, { email: "other@aud.example" })).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "email",
    });
    expect((await typed.call("deleteSubscriber", { path: { id } })).response.status).toBe(204);
    expect((await typed.call("getSubscriber", { path: { id } })).error?.status).toBe(404);
    expect((await typed.call("deleteSubscriber", { path: { id } })).error?.status).toBe(404);
  });

  test("tags: created with POST (201, then 200), counted, deleted from every subscriber", async () => {
    expect((await api.post("/api/v1/tags", { name: "Spring sale" })).status).toBe(201);
    expect((await api.post("/api/v1/tags", { name: "Spring sale" })).status).toBe(200);
    await api.post("/api/v1/subscribers", { email: "t1@aud.example", tags: ["Spring sale"] });
    await api.post("/api/v1/subscribers", { email: "t2@aud.example", tags: ["Spring sale", "x"] });
    const counts = (await api.get("/api/v1/tags")).body.data as Json[];
    expect(counts.find((t) => t.name === "Spring sale")).toEqual({ name: "Spring sale", subscribers: 2 });
    expect((await api.call("DELETE", `/api/v1/tags/${encodeURIComponent("Spring sale")}`)).status).toBe(204);
    expect((await api.call("DELETE", "/api/v1/tags/Spring%20sale")).status).toBe(404);
    expect((await api.get("/api/v1/subscribers/t2@aud.example")).body.tags).toEqual(["x"]);
  });

  test("list: newest first, filters, pages", async () => {
    const { typed } = api;
    for (let i = 0; i < 5; i++)
      await typed.call("upsertSubscriber", {
        body: { email: `list${i}@list.aud.example`, tags: i % 2 ? ["odd"] : [] },
      });
    const list = async (query: RequestInput<"listSubscribers">["query"]) => {
      const { data, error } = await typed.call("listSubscribers", { query });
      if (error) throw error;
      return data;
    };
    const first = await list({ email: "list", limit: 2 });
    expect(first.data.map((s) => s.email)).toEqual(["list4@list.aud.example", "list3@list.aud.example"]);
    const second = await list({ email: "list", limit: 2, cursor: first.nextCursor ?? undefined });
    expect(second.data.map((s) => s.email)).toEqual(["list2@list.aud.example", "list1@list.aud.example"]);
    const odd = await list({ tag: "odd" });
    expect(odd.data.map((s) => s.email)).toEqual(["list3@list.aud.example", "list1@list.aud.example"]);
    expect(odd.nextCursor).toBeNull();
  });

  test("another organization's subscriber is a 404 and never its data", async () => {
    const { body } = await api.post("/api/v1/subscribers", { email: "secret@aud.example", name: "Secret" });
    const them = client(await stack.org("aud-other", "premium"));
    for (const ref of [body.id as string, "secret@aud.example"]) {
      for (const [method, path, b] of [
        ["GET", `/api/v1/subscribers/${ref}`],
        ["PATCH", `/api/v1/subscribers/${ref}`, { name: "Mine now" }],
        ["POST", `/api/v1/subscribers/${ref}/tags`, { tags: ["stolen"] }],
        ["GET", `/api/v1/subscribers/${ref}/events`],
        ["DELETE", `/api/v1/subscribers/${ref}`],
      ] as [string, string, unknown?][]) {
        const a = await them.call(method, path, b);
        expect({ method, path, status: a.status, code: a.body.code }).toEqual({
          method,
          path,
          status: 404,
          code: "NOT_FOUND",
        });
        expect(JSON.stringify(a.body)).not.toContain("Secret");
      }
    }
    expect((await them.get("/api/v1/subscribers")).body.data).toEqual([]);
    expect((await api.get(`/api/v1/subscribers/${body.id}`)).body).toMatchObject({ name: "Secret", tags: [] });
  });

  test("messages to a subscriber's address are its events: queued, delivered, bounced, complained", async () => {
    const send = (to: string) =>
      api.post("/api/v1/emails", { from: "news@aud.example", to, subject: "Hello", text: "Hi" }).then((a) => {
        expect(a.status).toBe(202);
        return a.body.id as string;
      });
    for (const kind of ["delivered", "bounced", "complained"])
      await api.post("/api/v1/subscribers", { email: `${kind}+sub@fixtures.test` });
    const ids = {
      delivered: await send("Del <delivered+sub@fixtures.test>"),
      bounced: await send("bounced+sub@fixtures.test"),
      complained: await send("complained+sub@fixtures.test"),
    };
    const expected: Record<string, string[]> = {
      delivered: ["email.delivered", "email.queued", "subscriber.created"],
      bounced: ["email.bounced", "email.queued", "subscriber.created"],
      complained: ["email.complained", "email.delivered", "email.queued", "subscriber.created"],
    };
    for (const [kind, types] of Object.entries(expected)) {
      const ref = `${kind}+sub@fixtures.test`;
      await waitFor(`${kind}: ${types[0]}`, async () => (await api.events(ref)).length === types.length, 20_000);
      expect(await api.events(ref)).toEqual(types);
      const [last] = (await api.get(`/api/v1/subscribers/${encodeURIComponent(ref)}/events?limit=1`)).body
        .data as Json[];
      expect(last!.data).toEqual({ messageId: ids[kind as keyof typeof ids], subject: "Hello" });
    }
  });

  test("the batch: one result per item in order, a bad item fails alone, one request against the quota", async () => {
    const before = Number((await api.get("/api/v1/tags")).headers.get("RateLimit-Remaining"));
    const res = await api.post("/api/v1/subscribers/batch", {
      triggerWorkflows: false,
      subscribers: [
        { email: "b1@aud.example", tags: ["batch"] },
        { email: "not an email" },
        { email: "kim@aud.example", triggerWorkflows: true },
        { email: "B1@aud.example", tags: ["batch"] },
        "nope",
      ],
    });
    expect(res.status).toBe(200);
    expect(Number(res.headers.get("RateLimit-Remaining"))).toBeGreaterThanOrEqual(before - 1);
    const data = res.body.data as Json[];
    expect(data.map((d) => [d.email, d.result])).toEqual([
      ["b1@aud.example", "created"],
      ["not an email", "error"],
      ["kim@aud.example", "unchanged"],
      ["b1@aud.example", "unchanged"],
      [null, "error"],
    ]);
    expect(data[1]).toMatchObject({
      id: null,
      field: "subscribers[1].email",
      error: expect.stringContaining("not an email address"),
    });
    expect(data[0]!.id).toBe(data[3]!.id);
    const events = (await api.get(`/api/v1/subscribers/${data[0]!.id}/events`)).body.data as Json[];
    expect(events.map((e) => [e.type, e.triggerWorkflows])).toEqual([
      ["tag.added", false],
      ["subscriber.created", false],
    ]);
  });

  test("bad input: every 422, with the field named; 413 over 1 MB; a batch of 1001", async () => {
    const cases: [unknown, string][] = [
      [{}, "email"],
      [{ email: "nope" }, "email"],
      [{ email: "Name <n@aud.example>" }, "email"],
      [{ email: `${"a".repeat(250)}@aud.example` }, "email"],
      [{ email: "f@aud.example", fields: { nested: { a: 1 } } }, "fields.nested"],
      [{ email: "f@aud.example", fields: { list: [1] } }, "fields.list"],
      [
        { email: "f@aud.example", fields: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) },
        "fields",
      ],
      [{ email: "f@aud.example", fields: "x" }, "fields"],
      [{ email: "f@aud.example", tags: ["a/b"] }, "tags[0]"],
      [{ email: "f@aud.example", tags: [""] }, "tags[0]"],
      [{ email: "f@aud.example", tags: ["x".repeat(65)] }, "tags[0]"],
      [{ email: "f@aud.example", tags: "vip" }, "tags"],
      [{ email: "f@aud.example", status: "gone" }, "status"],
      [{ email: "f@aud.example", triggerWorkflows: "no" }, "triggerWorkflows"],
      [{ email: "f@aud.example", colour: "red" }, "colour"],
      [[], "body"],
    ];
    for (const [body, field] of cases) {
      const a = await api.post("/api/v1/subscribers", body);
      expect({ body, status: a.status, code: a.body.code, field: a.body.field }).toEqual({
        body,
        status: 422,
        code: "VALIDATION_FAILED",
        field,
      });
    }
    expect((await api.post("/api/v1/tags", { name: "no/slash" })).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "name",
    });
    expect((await api.get("/api/v1/subscribers?limit=101")).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "limit",
    });
    expect((await api.get("/api/v1/subscribers?cursor=bogus")).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "cursor",
    });
    expect((await api.get("/api/v1/subscribers?status=maybe")).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "status",
    });
    expect(
      (await api.post("/api/v1/subscribers", { email: "big@aud.example", name: "x".repeat(1_100_000) })).status,
    ).toBe(413);
    const twoMb = {
      subscribers: Array.from({ length: 1_000 }, (_, i) => ({
        email: `big${i}@aud.example`,
        fields: { pad: "x".repeat(2_000) },
      })),
    };
    expect(JSON.stringify(twoMb).length).toBeGreaterThan(2_000_000);
    expect((await api.post("/api/v1/subscribers/batch", twoMb)).status).toBe(413);
    const tooMany = { subscribers: Array.from({ length: 1_001 }, (_, i) => ({ email: `many${i}@aud.example` })) };
    expect((await api.post("/api/v1/subscribers/batch", tooMany)).body).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "subscribers",
    });
    expect((await api.get("/api/v1/subscribers/many0@aud.example")).status).toBe(404);
    expect((await api.call("POST", "/api/v1/subscribers", undefined, "{oops")).status).toBe(400);
  });
});
