// test-runner: alone
// Campaigns end to end, through limiterd, an API process and a worker with the file sink: the
// one-click unsubscribe (RFC 8058) and its skip in the next campaign; cancel; a scheduled send; a
// kill -9 of the daemon in the middle of a campaign. (Their pacing under load is
// lanes_load_process.test.ts's.) Campaigns of 1,000 and 2,000 at 40 a second: this file runs alone.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { CAMPAIGN_PAGE } from "../daemon/campaign_fanout";
import { type LimiterClients, limiterClients } from "../limiterclient/client";
import { type Stack, startStack, waitFor } from "../testkit/testkit";

const PUBLIC_URL = "https://mail.example.test";
const PAGE = CAMPAIGN_PAGE;

let stack: Stack;
let daemon: LimiterClients;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { PUBLIC_URL, TRUST_PROXY: "127.0.0.1" } });
  daemon = limiterClients(stack.limiterUrl, stack.credential);
}, 30_000);
afterAll(async () => {
  await stack?.stop();
});

type Json = Record<string, any>;

/** An API call with the token; each from its own client IP, so only the organization's quota counts. */
async function api(
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      "X-Forwarded-For": "10.7.0.1",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** A POST without a body or a Content-Length, on a socket of its own; the whole answer. */
function rawPost(path: string, token: string): Promise<string> {
  const { hostname, port } = new URL(stack.apiUrls[0]!);
  return new Promise((resolve, reject) => {
    let answer = "";
    const socket = connect({ host: hostname, port: Number(port) }, () =>
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\nX-Forwarded-For: 10.7.0.2\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString();
    });
    socket.on("end", () => resolve(answer));
    socket.on("error", reject);
  });
}

const campaignBody = (slug: string, audience: Json) => ({
  name: "News",
  from: `News <news@${slug}.example>`,
  subject: "Hello {{subscriber.name}}",
  markdown: "Hi **{{subscriber.name}}**, plan {{subscriber.fields.plan}}. [Unsubscribe]({{unsubscribeUrl}})",
  audience,
});

async function finished(token: string, id: string, want: (c: Json) => boolean, timeoutMs = 20_000): Promise<Json> {
  let c: Json = {};
  await waitFor(
    `campaign ${id}`,
    async () => {
      c = (await api(token, "GET", `/api/v1/campaigns/${id}`)).body;
      return want(c);
    },
    timeoutMs,
  );
  return c;
}

/** The .eml files the worker wrote, by recipient. */
function sink(): Map<string, string> {
  const dir = join(stack.dataDir, "sink");
  const out = new Map<string, string>();
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".eml"))) {
    const eml = readFileSync(join(dir, f), "utf8");
    out.set(/^To: (.*)$/m.exec(eml)![1]!.trim(), eml);
  }
  return out;
}

test("drafts are checked like a send; send, read, list; a second send is 409; a From domain that is not verified fails the campaign", async () => {
  const token = await stack.org("drafts", "enterprise");
  expect(
    (
      await api(token, "POST", "/api/v1/campaigns", {
        ...campaignBody("drafts", { all: true }),
        from: "x@elsewhere.example",
        markdown: undefined,
        text: "t",
      })
    ).status,
  ).toBe(201);
  for (const [body, field] of [
    [{ ...campaignBody("drafts", { all: true }), name: "" }, "name"],
    [{ ...campaignBody("drafts", { tags: [] }) }, "audience"],
    [{ ...campaignBody("drafts", { all: true }), from: "nobody" }, "from"],
    [{ ...campaignBody("drafts", { all: true }), markdown: undefined }, "html"],
    [{ ...campaignBody("drafts", { all: true }), lane: "bulk" }, "lane"],
  ] as const) {
    const res = await api(token, "POST", "/api/v1/campaigns", body);
    expect({ status: res.status, field: res.body.field }).toEqual({ status: 422, field });
  }
  const made = await api(token, "POST", "/api/v1/campaigns", campaignBody("drafts", { tags: ["news"] }));
  expect(made.status).toBe(201);
  const id = made.body.id as string;
  expect(id).toMatch(/^cmp_[0-9a-f]{24}$/);
  expect(made.body).toMatchObject({
    status: "draft",
    audience: { tags: ["news"] },
    scheduledAt: null,
    stats: { recipients: 0, queued: 0 },
  });
  expect(made.body.html).toContain("<strong>{{subscriber.name}}</strong>");
  const listed = await api(token, "GET", "/api/v1/campaigns?limit=1");
  expect(listed.body.data.map((c: Json) => c.id)).toEqual([id]);
  expect(listed.body.nextCursor).toEqual(expect.any(String));
  const later = new Date(Date.now() + 3_600_000).toISOString();
  const scheduled = await api(token, "POST", `/api/v1/campaigns/${id}/send`, { scheduledAt: later });
  expect(scheduled).toMatchObject({ status: 202, body: { status: "scheduled", scheduledAt: later } });
  expect((await api(token, "POST", `/api/v1/campaigns/${id}/send`, {})).status).toBe(409);
  expect((await api(token, "POST", `/api/v1/campaigns/${id}/cancel`)).body.status).toBe("cancelled");
  expect((await api(token, "GET", "/api/v1/campaigns/cmp_000000000000000000000000")).status).toBe(404);
  const other = await stack.org("drafts-other", "free");
  expect((await api(other, "GET", `/api/v1/campaigns/${id}`)).status).toBe(404);

  // The From domain of the first draft is not one of the organization's: nothing is queued.
  await api(token, "POST", "/api/v1/subscribers", { email: "someone@example.org", triggerWorkflows: false });
  const foreign = (await api(token, "GET", "/api/v1/campaigns?limit=100")).body.data.find(
    (c: Json) => c.from === "x@elsewhere.example",
  );
  // Sent as `curl -X POST` sends it: no body, not even a Content-Length.
  const bare = await rawPost(`/api/v1/campaigns/${foreign.id}/send`, token);
  expect(bare).toMatch(/^HTTP\/1\.1 202 /);
  expect(bare).toContain('"status":"sending"');
  const failed = await finished(token, foreign.id, (c) => c.status !== "sending");
  expect(failed).toMatchObject({
    status: "failed",
    error: "elsewhere.example is not a verified sending domain of this organization",
    stats: { queued: 0 },
  });
}, 60_000);

test("one-click unsubscribe: the POST flips the subscriber (idempotent); the next campaign skips them, the one a message bounced for, and a suppressed one", async () => {
  const token = await stack.org("news", "enterprise");
  const people = ["ann@example.org", "bob@example.org", "cy@example.org", "bounced@fixtures.test"];
  const batch = await api(token, "POST", "/api/v1/subscribers/batch", {
    subscribers: people.map((email, i) => ({ email, name: `P<${i}>`, fields: { plan: "pro" }, tags: ["news"] })),
    triggerWorkflows: false,
  });
  expect(batch.status).toBe(200);
  await api(token, "POST", "/api/v1/subscribers", {
    email: "dee@example.org",
    tags: ["other"],
    triggerWorkflows: false,
  });

  const first = (await api(token, "POST", "/api/v1/campaigns", campaignBody("news", { tags: ["news"] }))).body;
  expect((await api(token, "POST", `/api/v1/campaigns/${first.id}/send`)).body).toMatchObject({ status: "sending" });
  const done = await finished(token, first.id, (c) => c.status === "sent" && c.stats.delivered + c.stats.bounced === 4);
  expect(done.stats).toEqual({
    recipients: 4,
    queued: 4,
    delivered: 3,
    bounced: 1,
    failed: 0,
    skipped: 0,
    suppressed: 0,
  });

  const mail = sink().get("ann@example.org")!;
  const link = /^List-Unsubscribe: <([^>]+)>$/m.exec(mail)![1]!;
  expect(link).toMatch(new RegExp(`^${PUBLIC_URL}/u/[A-Za-z0-9_-]{22}$`));
  expect(mail).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
  expect(mail).toMatch(/^Subject: Hello P<0>$/m);
  expect(mail).toContain("P&lt;0&gt;"); // HTML-escaped in the HTML part
  expect(sink().has("dee@example.org")).toBe(false);

  const page = `${stack.apiUrls[0]}${new URL(link).pathname}`;
  const confirm = await fetch(page);
  expect(confirm.status).toBe(200);
  expect(await confirm.text()).toMatch(/<form method="post">/);
  expect((await api(token, "GET", "/api/v1/subscribers/ann@example.org")).body.status).toBe("subscribed"); // a GET changes nothing
  for (let i = 0; i < 2; i++) {
    const click = await fetch(page, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "List-Unsubscribe=One-Click",
    });
    expect(click.status).toBe(200);
    expect(await click.text()).toContain("ann@example.org will receive no more");
  }
  expect((await fetch(`${stack.apiUrls[0]}/u/AAAAAAAAAAAAAAAAAAAAAA`, { method: "POST" })).status).toBe(404);
  expect((await api(token, "GET", "/api/v1/subscribers/ann@example.org")).body.status).toBe("unsubscribed");
  const events = (await api(token, "GET", "/api/v1/subscribers/ann@example.org/events")).body.data.map(
    (e: Json) => e.type,
  );
  expect(events.filter((t: string) => t === "subscriber.unsubscribed")).toHaveLength(1);

  // On the organization's suppression list: skipped, and counted as suppressed.
  expect((await api(token, "POST", "/api/v1/suppressions", { email: "cy@example.org" })).status).toBe(201);
  const second = (await api(token, "POST", "/api/v1/campaigns", campaignBody("news", { tags: ["news"] }))).body;
  await api(token, "POST", `/api/v1/campaigns/${second.id}/send`);
  const again = await finished(token, second.id, (c) => c.status === "sent" && c.stats.delivered === 1);
  expect(again.stats).toEqual({
    recipients: 4,
    queued: 1,
    delivered: 1,
    bounced: 0,
    failed: 0,
    skipped: 3,
    suppressed: 1,
  });
}, 60_000);

async function importAudience(token: string, n: number): Promise<void> {
  for (let b = 0; b < n / 1_000; b++) {
    const subscribers = Array.from({ length: 1_000 }, (_, i) => ({
      email: `reader${b * 1_000 + i}@list.example`,
      name: `Reader ${b * 1_000 + i}`,
    }));
    const res = await api(token, "POST", "/api/v1/subscribers/batch", { subscribers, triggerWorkflows: false });
    expect(res.status).toBe(200);
  }
}

const bulkDepth = async () => Number((await daemon.lanes.getLanes({})).lanes.find((l) => l.lane === Lane.BULK)!.depth);

test("cancel stops the fan-out at once: at most the page under way is queued after it, and the bulk lane drains", async () => {
  const token = await stack.org("stop", "enterprise");
  await importAudience(token, 2_000);
  const c = (
    await api(token, "POST", "/api/v1/campaigns", {
      name: "Oops",
      from: "News <news@stop.example>",
      subject: "Hi",
      text: "Hello",
      audience: { all: true },
    })
  ).body;
  await api(token, "POST", `/api/v1/campaigns/${c.id}/send`);
  await finished(token, c.id, (x) => x.stats.queued >= 2 * PAGE);
  const cancelled = await api(token, "POST", `/api/v1/campaigns/${c.id}/cancel`);
  expect(cancelled.body.status).toBe("cancelled");
  await waitFor("the bulk lane to drain", async () => (await bulkDepth()) === 0, 20_000);
  const after = (await api(token, "GET", `/api/v1/campaigns/${c.id}`)).body;
  console.log(
    `cancel: queued ${cancelled.body.stats.queued} when cancelled, ${after.stats.queued} in the end, of ${after.stats.recipients}`,
  );
  expect(after.status).toBe("cancelled");
  expect(after.stats.queued).toBeLessThanOrEqual(cancelled.body.stats.queued + PAGE);
  expect(after.stats.queued).toBeLessThan(2_000);
  await Bun.sleep(1_000);
  expect((await api(token, "GET", `/api/v1/campaigns/${c.id}`)).body.stats.queued).toBe(after.stats.queued);
  expect((await api(token, "POST", `/api/v1/campaigns/${c.id}/send`)).status).toBe(409);
}, 60_000);

test("a scheduled campaign starts at scheduledAt (a due time in the records), not before", async () => {
  const token = await stack.org("later", "enterprise");
  await api(token, "POST", "/api/v1/subscribers", { email: "early@example.org", triggerWorkflows: false });
  const c = (
    await api(token, "POST", "/api/v1/campaigns", {
      name: "Later",
      from: "News <news@later.example>",
      subject: "Hi",
      text: "Hello",
      audience: { all: true },
    })
  ).body;
  const at = Date.now() + 2_000;
  expect(
    (await api(token, "POST", `/api/v1/campaigns/${c.id}/send`, { scheduledAt: new Date(at).toISOString() })).body
      .status,
  ).toBe("scheduled");
  await Bun.sleep(1_000);
  expect((await api(token, "GET", `/api/v1/campaigns/${c.id}`)).body).toMatchObject({
    status: "scheduled",
    stats: { queued: 0 },
  });
  const sent = await finished(token, c.id, (x) => x.status === "sent" && x.stats.delivered === 1);
  expect(Date.parse(sent.updatedAt)).toBeGreaterThanOrEqual(at);
}, 30_000);

test("kill -9 of limiterd in the middle of a campaign: after the restart it goes on where it stopped, and nobody gets the message twice", async () => {
  const token = await stack.org("resume", "enterprise");
  await importAudience(token, 1_000);
  const c = (
    await api(token, "POST", "/api/v1/campaigns", {
      name: "Resume",
      from: "News <news@resume.example>",
      subject: "Hi",
      text: "Hello",
      audience: { all: true },
    })
  ).body;
  await api(token, "POST", `/api/v1/campaigns/${c.id}/send`);
  await finished(token, c.id, (x) => x.stats.queued >= 3 * PAGE);
  await stack.restartLimiterd();
  const done = await finished(token, c.id, (x) => x.status === "sent" && x.stats.delivered === 1_000, 90_000);
  expect(done.stats).toEqual({
    recipients: 1_000,
    queued: 1_000,
    delivered: 1_000,
    bounced: 0,
    failed: 0,
    skipped: 0,
    suppressed: 0,
  });
  const files = readdirSync(join(stack.dataDir, "sink"))
    .filter((n) => n.endsWith(".eml"))
    .map((f) => readFileSync(join(stack.dataDir, "sink", f), "utf8"));
  const toResume = files.filter((eml) => /^From: News <news@resume\.example>$/m.test(eml));
  expect(toResume).toHaveLength(1_000);
  expect(new Set(toResume.map((eml) => /^To: (.*)$/m.exec(eml)![1])).size).toBe(1_000);
}, 150_000);
