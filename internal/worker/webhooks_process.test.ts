// test-runner: alone
// Webhooks end to end over separate processes (limiterd, api, worker) and a receiver this test
// starts: signatures checked by an independent Standard Webhooks verifier, retries, filters,
// organizations kept apart, a receiver that hangs while transactional mail goes out, a worker
// killed mid-attempt, the excerpt each attempt keeps of the answer, and the Redis + PostgreSQL deployment.
// WEBHOOK_SCHEDULE_DIVISOR=1000 turns the retry schedule's 5 s and 5 min into 5 ms and 300 ms.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac, timingSafeEqual } from "node:crypto";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../limiterclient/client";
import { startPostgres } from "../testkit/postgres";
import { type Received, type Receiver, startReceiver } from "../testkit/receiver";
import { getJson, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

/** The receiver's side of Standard Webhooks, written from the specification, not from the product's signer. */
function verifyStandardWebhook(secret: string, r: Received, nowS: number, toleranceS = 300): boolean {
  const id = r.headers["webhook-id"];
  const ts = r.headers["webhook-timestamp"];
  const sigs = r.headers["webhook-signature"];
  if (!id || !ts || !sigs || !/^\d+$/.test(ts)) return false;
  if (Math.abs(nowS - Number(ts)) > toleranceS) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected = createHmac("sha256", key).update(`${id}.${ts}.${r.body}`).digest();
  return sigs.split(" ").some((s) => {
    const [version, b64] = s.split(",");
    const given = Buffer.from(b64 ?? "", "base64");
    return version === "v1" && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

interface Delivery {
  id: string;
  type: string;
  state: string;
  nextAttemptAt: string | null;
  attempts: {
    attempt: number;
    statusCode: number | null;
    error: string | null;
    at: string;
    durationMs: number;
    responseExcerpt: string;
  }[];
}

const enc = new TextEncoder();

/** A body that never ends: 64 KB of "x" each time the reader asks for more. */
const endless = () =>
  new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(enc.encode("x".repeat(65_536)));
    },
  });

/** The receiver is on loopback, which a worker refuses by default. */
const LOOPBACK = { WEBHOOK_ALLOW_PRIVATE_URLS: "1" };

const mail = (slug: string, to: string, lane = "transactional") => ({
  from: `Acme <no-reply@${slug}.example>`,
  to,
  subject: `To ${to}`,
  text: "Hello",
  lane,
});

async function createWebhook(stack: Stack, token: string, body: unknown) {
  const res = await fetch(`${stack.apiUrls[0]}/api/v1/webhooks`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function deliveries(stack: Stack, token: string, webhookId: string): Promise<Delivery[]> {
  return (await getJson(`${stack.apiUrls[0]}/api/v1/webhooks/${webhookId}/deliveries`, token)).body.data as Delivery[];
}

describe("webhooks over real processes", () => {
  let stack: Stack;
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = startReceiver();
    stack = await startStack({ workers: 1, env: { ...LOOPBACK, WEBHOOK_SCHEDULE_DIVISOR: "1000" } });
  });
  afterAll(async () => {
    await stack?.stop();
    await receiver?.stop();
  });

  test("signed as Standard Webhooks: an independent verifier accepts every request, and only with the right secret", async () => {
    const token = await stack.org("signed", "premium");
    const made = await createWebhook(stack, token, {
      url: `${receiver.url}/signed`,
      events: ["email.queued", "email.delivered"],
    });
    expect(made.status).toBe(201);
    expect(made.headers.get("RateLimit-Policy")).toBe('"premium";q=700;w=60');
    expect(made.body).toMatchObject({
      url: `${receiver.url}/signed`,
      events: ["email.queued", "email.delivered"],
      disabled: false,
    });
    expect(made.body.id).toMatch(/^wh_[0-9a-f]{24}$/);
    const secret = made.body.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const sent = await sendEmail(stack.apiUrls[0]!, token, mail("signed", "delivered@fixtures.test"));
    expect(sent.status).toBe(202);
    await waitFor("two events", async () => receiver.at("/signed").length >= 2);
    const got = receiver.at("/signed");
    const bodies = got.map((r) => JSON.parse(r.body));
    expect(bodies.map((b) => b.type).sort()).toEqual(["email.delivered", "email.queued"]);
    for (const b of bodies) {
      expect(Object.keys(b).sort()).toEqual(["data", "timestamp", "type"]);
      expect(b.data).toMatchObject({ emailId: sent.body.id, to: "delivered@fixtures.test", lane: "transactional" });
    }
    const nowS = Math.floor(Date.now() / 1_000);
    for (const r of got) {
      expect(r.headers["content-type"]).toBe("application/json");
      expect(verifyStandardWebhook(secret, r, nowS)).toBe(true);
      expect(verifyStandardWebhook(`whsec_${Buffer.alloc(24, 7).toString("base64")}`, r, nowS)).toBe(false);
      expect(verifyStandardWebhook(secret, { ...r, body: r.body.replace("email.", "email_") }, nowS)).toBe(false);
      expect(verifyStandardWebhook(secret, r, nowS + 301)).toBe(false); // outside the tolerance
    }
    // The secret is shown once: the list does not carry it.
    const list = await getJson(`${stack.apiUrls[0]}/api/v1/webhooks`, token);
    expect(list.body).toEqual({ data: [expect.not.objectContaining({ secret: expect.anything() })], nextCursor: null });
  });

  test("a 500 is retried with the same webhook-id, the attempts are listed with their status codes, and a success ends the retries", async () => {
    const token = await stack.org("retry", "premium");
    receiver.answer("/flaky", (_r, nth) => (nth <= 2 ? 500 : 204));
    const made = await createWebhook(stack, token, { url: `${receiver.url}/flaky`, events: ["email.delivered"] });
    const webhookId = made.body.id as string;
    await sendEmail(stack.apiUrls[0]!, token, mail("retry", "delivered@fixtures.test"));
    await waitFor(
      "the delivery to succeed",
      async () => (await deliveries(stack, token, webhookId))[0]?.state === "delivered",
    );
    const [d] = await deliveries(stack, token, webhookId);
    expect(d!.type).toBe("email.delivered");
    expect(d!.nextAttemptAt).toBeNull();
    expect(d!.attempts.map((a) => [a.attempt, a.statusCode, a.error])).toEqual([
      [1, 500, null],
      [2, 500, null],
      [3, 204, null],
    ]);
    const got = receiver.at("/flaky");
    expect(new Set(got.map((r) => r.headers["webhook-id"]))).toEqual(new Set([d!.id]));
    // The next retry would have been due 1.8 s (30 min / 1000) after the second; nothing comes.
    await Bun.sleep(2_500);
    expect(receiver.at("/flaky")).toHaveLength(3);
  }, 20_000);

  test("each attempt keeps an excerpt of the answer: cleaned UTF-8, 256 characters of an endless body, nothing without a body", async () => {
    const token = await stack.org("excerpt", "premium");
    // 503 with a body holding an invalid byte and control characters, then an endless 200.
    const maintenance = Buffer.concat([
      Buffer.from('{"error":"maintenance"}\r\n\tback at 15:00 \u0007\u001b[0m'),
      Buffer.from([0xff]),
      Buffer.from(" ✉"),
    ]);
    receiver.answer("/answers", (_r, nth) =>
      nth === 1
        ? new Response(maintenance, { status: 503 })
        : nth === 2
          ? 500
          : new Response(endless(), { status: 200, headers: { "Content-Type": "text/plain" } }),
    );
    const made = await createWebhook(stack, token, { url: `${receiver.url}/answers`, events: ["email.delivered"] });
    const webhookId = made.body.id as string;
    await sendEmail(stack.apiUrls[0]!, token, mail("excerpt", "delivered@fixtures.test"));
    await waitFor(
      "the delivery to succeed",
      async () => (await deliveries(stack, token, webhookId))[0]?.state === "delivered",
    );
    const [d] = await deliveries(stack, token, webhookId);
    expect(d!.attempts.map((a) => [a.attempt, a.statusCode, a.responseExcerpt])).toEqual([
      [1, 503, '{"error":"maintenance"}\n\tback at 15:00 [0m\uFFFD ✉'],
      [2, 500, ""],
      [3, 200, "x".repeat(256)],
    ]);
    // The endless body was not read to its end: the attempt ended with the excerpt.
    expect(d!.attempts[2]!.durationMs).toBeLessThan(5_000);
  }, 20_000);

  test("an endpoint receives only the events it subscribed to", async () => {
    const token = await stack.org("filters", "premium");
    const all = await createWebhook(stack, token, {
      url: `${receiver.url}/all`,
      events: ["email.queued", "email.delivered", "email.bounced"],
    });
    const bounces = await createWebhook(stack, token, { url: `${receiver.url}/bounces`, events: ["email.bounced"] });
    expect([all.status, bounces.status]).toEqual([201, 201]);
    await sendEmail(stack.apiUrls[0]!, token, mail("filters", "delivered@fixtures.test"));
    await sendEmail(stack.apiUrls[0]!, token, mail("filters", "bounced@fixtures.test"));
    const types = (path: string) => receiver.at(path).map((r) => JSON.parse(r.body).type as string);
    await waitFor("four events at /all", async () => types("/all").length >= 4);
    await waitFor("the bounce at /bounces", async () => types("/bounces").length >= 1);
    expect(types("/all").sort()).toEqual(["email.bounced", "email.delivered", "email.queued", "email.queued"]);
    expect(types("/bounces")).toEqual(["email.bounced"]);
  });

  test("another organization's webhooks are invisible: not listed, 404 to delete or read", async () => {
    const owner = await stack.org("owner", "premium");
    const other = await stack.org("other", "premium");
    const made = await createWebhook(stack, owner, { url: `${receiver.url}/owner`, events: ["email.queued"] });
    const id = made.body.id as string;
    expect((await getJson(`${stack.apiUrls[0]}/api/v1/webhooks`, other)).body).toEqual({ data: [], nextCursor: null });
    const del = await fetch(`${stack.apiUrls[0]}/api/v1/webhooks/${id}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${other}` },
    });
    expect([del.status, ((await del.json()) as { code: string }).code]).toEqual([404, "NOT_FOUND"]);
    expect((await getJson(`${stack.apiUrls[0]}/api/v1/webhooks/${id}/deliveries`, other)).status).toBe(404);
    // The owner still has it, and may delete it.
    expect((await getJson(`${stack.apiUrls[0]}/api/v1/webhooks/${id}/deliveries`, owner)).status).toBe(200);
    const gone = await fetch(`${stack.apiUrls[0]}/api/v1/webhooks/${id}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${owner}` },
    });
    expect(gone.status).toBe(204);
    expect((await getJson(`${stack.apiUrls[0]}/api/v1/webhooks`, owner)).body).toEqual({ data: [], nextCursor: null });
  });

  test("validation: url and events are checked, with the field named", async () => {
    const token = await stack.org("valid", "free");
    const cases: [unknown, string][] = [
      [{ url: "ftp://x.example/h", events: ["email.queued"] }, "url"],
      [{ url: "/relative", events: ["email.queued"] }, "url"],
      [{ url: "https://x.example/h", events: [] }, "events"],
      [{ url: "https://x.example/h", events: ["email.queued", "email.read"] }, "events[1]"],
      [{ url: "https://x.example/h", events: ["email.queued"], secret: "mine" }, "secret"],
    ];
    for (const [body, field] of cases) {
      const res = await createWebhook(stack, token, body);
      expect({ body, status: res.status, field: res.body.field }).toEqual({ body, status: 422, field });
    }
    const page = await getJson(`${stack.apiUrls[0]}/api/v1/webhooks?limit=101`, token);
    expect([page.status, page.body.field]).toEqual([422, "limit"]);
  });
});

describe("a receiver that hangs", () => {
  let stack: Stack;
  let receiver: Receiver;
  const hang = Promise.withResolvers<number>();
  beforeAll(async () => {
    receiver = startReceiver();
    receiver.answer("/hang", () => hang.promise);
    stack = await startStack({ workers: 1, env: LOOPBACK });
  });
  afterAll(async () => {
    hang.resolve(200);
    await stack?.stop();
    await receiver?.stop();
  });

  test("does not delay a transactional send by more than 50 ms (accept latency, lane release), nor take the other endpoints' slots", async () => {
    const token = await stack.org("hang", "enterprise");
    const lanes = limiterClients(stack.limiterUrl, stack.credential).lanes;
    /** Sends n messages one by one; each one's accept latency, and the delay from its acceptance to its release from the lane. */
    const measure = async (n: number) => {
      const out: { acceptMs: number; releaseMs: number }[] = [];
      for (let i = 0; i < n; i++) {
        const started = performance.now();
        const sent = await sendEmail(stack.apiUrls[0]!, token, mail("hang", `delivered+${i}@fixtures.test`));
        const acceptMs = performance.now() - started;
        expect(sent.status).toBe(202);
        const id = sent.body.id as string;
        const view = await getJson(`${stack.apiUrls[0]}/api/v1/emails/${id}`, token);
        const createdMs = Date.parse(view.body.createdAt as string);
        let releasedMs = 0;
        await waitFor(`${id} released`, async () => {
          const r = (await lanes.listReleases({ lane: Lane.TRANSACTIONAL, sinceMs: BigInt(createdMs) })).releases.find(
            (x) => x.messageId === id,
          );
          releasedMs = Number(r?.releasedAtMs ?? 0);
          return r !== undefined;
        });
        out.push({ acceptMs, releaseMs: releasedMs - createdMs });
        await Bun.sleep(30); // one send per lane slot or so: a send, not a backlog, is measured
      }
      return out;
    };
    const max = (xs: number[]) => Math.max(...xs);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const before = await measure(10);

    await createWebhook(stack, token, { url: `${receiver.url}/hang`, events: ["email.queued", "email.delivered"] });
    // In the bulk lane, so that the transactional lane holds only the sends measured.
    for (let i = 0; i < 20; i++)
      await sendEmail(stack.apiUrls[0]!, token, mail("hang", `delivered+h${i}@fixtures.test`, "bulk"));
    await waitFor("webhook attempts to hang", async () => receiver.at("/hang").length >= 8);
    const during = await measure(20);
    // The attempts were still hanging (15 s timeout) all along, an eighth of the worker's slots (one endpoint's share).
    expect(receiver.at("/hang")).toHaveLength(8);

    // Another organization's endpoint keeps the other slots: its webhooks arrive meanwhile.
    const other = await stack.org("bystander", "premium");
    await createWebhook(stack, other, { url: `${receiver.url}/bystander`, events: ["email.queued"] });
    await sendEmail(stack.apiUrls[0]!, other, mail("bystander", "delivered@fixtures.test"));
    await waitFor("the bystander's webhook", async () => receiver.at("/bystander").length === 1, 5_000);

    const ms = (xs: number[]) => xs.map(Math.round);
    const load = (await Bun.file("/proc/loadavg").text()).split(" ")[0];
    console.log(
      "hanging receiver:",
      JSON.stringify({ load, before, during, hanging: receiver.at("/hang").length }, (_k, v) =>
        typeof v === "number" ? Math.round(v) : v,
      ),
    );
    // Accept latency: the typical send is not slower by 50 ms; lane release: no send released
    // more than 50 ms later than the slowest release without webhooks (on a busy machine the
    // daemon's timers run late now and then, webhooks or not).
    expect(median(during.map((m) => m.acceptMs))).toBeLessThan(median(before.map((m) => m.acceptMs)) + 50);
    const releaseBound = max(before.map((m) => m.releaseMs)) + 50;
    expect(ms(during.map((m) => m.releaseMs)).filter((x) => x > releaseBound)).toEqual([]);
  }, 60_000);
});

describe("a worker killed during an attempt", () => {
  test("the lease runs out and another worker tries again, with the same webhook-id (at-least-once)", async () => {
    const receiver = startReceiver();
    const stack = await startStack({ env: LOOPBACK });
    const hang = Promise.withResolvers<number>();
    try {
      receiver.answer("/once", (_r, nth) => (nth === 1 ? hang.promise : 200));
      const token = await stack.org("killed", "premium");
      const first = stack.startWorker();
      const made = await createWebhook(stack, token, { url: `${receiver.url}/once`, events: ["email.queued"] });
      await sendEmail(stack.apiUrls[0]!, token, mail("killed", "delivered@fixtures.test"));
      await waitFor("the first attempt", async () => receiver.at("/once").length === 1);
      await first.stop("SIGKILL");
      hang.resolve(200); // the answer no one is left to hear
      stack.startWorker();
      // The 30 s lease (the 15 s timeout and a margin) runs out; then the second attempt.
      await waitFor("the second attempt", async () => receiver.at("/once").length === 2, 45_000);
      const [a, b] = receiver.at("/once");
      expect(b!.headers["webhook-id"]).toBe(a!.headers["webhook-id"]!);
      expect(b!.body).toBe(a!.body);
      await waitFor(
        "the delivery recorded",
        async () => (await deliveries(stack, token, made.body.id as string))[0]?.state === "delivered",
      );
      const [d] = await deliveries(stack, token, made.body.id as string);
      expect(d!.attempts.map((x) => x.statusCode)).toEqual([200]); // the killed worker's attempt was never reported
    } finally {
      await stack.stop();
      await receiver.stop();
    }
  }, 70_000);
});

describe("on Redis and PostgreSQL", () => {
  test("message events reach a webhook through the Redis hot store's flush into PostgreSQL, signed", async () => {
    const receiver = startReceiver();
    const redis = await startRedis();
    const pg = await startPostgres();
    const stack = await startStack({
      workers: 1,
      redisUrl: redis.url,
      env: { ...LOOPBACK, DATABASE_URL: await pg.newDatabase() },
    });
    try {
      const token = await stack.org("redispg", "premium");
      const made = await createWebhook(stack, token, {
        url: `${receiver.url}/rp`,
        events: ["email.bounced", "email.delivered"],
      });
      await sendEmail(stack.apiUrls[0]!, token, mail("redispg", "bounced@fixtures.test"));
      await waitFor("the bounce", async () => receiver.at("/rp").length >= 1);
      const [r] = receiver.at("/rp");
      expect(JSON.parse(r!.body).type).toBe("email.bounced");
      expect(verifyStandardWebhook(made.body.secret as string, r!, Math.floor(Date.now() / 1_000))).toBe(true);
      await waitFor(
        "the delivery recorded",
        async () => (await deliveries(stack, token, made.body.id as string))[0]?.state === "delivered",
      );
    } finally {
      await stack.stop();
      await receiver.stop();
      await pg.stop();
      await redis.stop();
    }
  }, 60_000);
});

describe("a receiver that answers its status and then hangs mid-body", () => {
  test("the attempt counts by its status and keeps the body that came, ended by the attempt's 15 s limit", async () => {
    const receiver = startReceiver();
    receiver.answer(
      "/stall",
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            start(c) {
              c.enqueue(enc.encode("accepted, still thinking"));
            },
          }),
          { status: 202 },
        ),
    );
    const stack = await startStack({ workers: 1, env: LOOPBACK });
    try {
      const token = await stack.org("stall", "premium");
      const made = await createWebhook(stack, token, { url: `${receiver.url}/stall`, events: ["email.queued"] });
      await sendEmail(stack.apiUrls[0]!, token, mail("stall", "delivered@fixtures.test"));
      await waitFor(
        "the attempt to be reported",
        async () => {
          return ((await deliveries(stack, token, made.body.id as string))[0]?.attempts.length ?? 0) >= 1;
        },
        40_000,
      );
      const [d] = await deliveries(stack, token, made.body.id as string);
      expect(d!.state).toBe("delivered");
      expect(d!.attempts).toEqual([
        expect.objectContaining({ statusCode: 202, error: null, responseExcerpt: "accepted, still thinking" }),
      ]);
      expect(receiver.at("/stall")).toHaveLength(1);
    } finally {
      await stack.stop();
      await receiver.stop();
    }
  }, 60_000);
});

describe("the daemon's side of a report", () => {
  test("an excerpt a worker sends is cleaned and cut to 256 characters before it is recorded", async () => {
    const stack = await startStack({ workers: 0 });
    try {
      const token = await stack.org("report", "premium");
      const made = await createWebhook(stack, token, { url: "https://hooks.example/report", events: ["email.queued"] });
      const webhookId = made.body.id as string;
      const queued = await fetch(`${stack.apiUrls[0]}/api/v1/webhooks/${webhookId}/test`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(queued.status).toBe(202);
      const delivery = limiterClients(stack.limiterUrl, stack.credential).webhookDelivery;
      const { tasks } = await delivery.claimWebhookDeliveries({ workerId: "test", max: 10 });
      expect(tasks).toHaveLength(1);
      await delivery.reportWebhookAttempts({
        reports: [
          {
            deliveryId: tasks[0]!.deliveryId,
            leaseToken: tasks[0]!.leaseToken,
            statusCode: 400,
            durationMs: 3,
            responseExcerpt: `bad\u0000\u001b request\r\n${"é".repeat(1_000)}`,
          },
        ],
      });
      const [d] = await deliveries(stack, token, webhookId);
      expect(d!.attempts.map((a) => a.responseExcerpt)).toEqual([`bad request\n${"é".repeat(256 - 12)}`]);
    } finally {
      await stack.stop();
    }
  }, 30_000);
});

describe("a URL on a private network", () => {
  test("is refused by default: nothing is sent, the attempts say why", async () => {
    const receiver = startReceiver();
    const stack = await startStack({ workers: 1, env: { WEBHOOK_SCHEDULE_DIVISOR: "1000" } });
    try {
      const token = await stack.org("private", "premium");
      const made = await createWebhook(stack, token, { url: `${receiver.url}/private`, events: ["email.queued"] });
      await sendEmail(stack.apiUrls[0]!, token, mail("private", "delivered@fixtures.test"));
      await waitFor(
        "two refused attempts",
        async () => ((await deliveries(stack, token, made.body.id as string))[0]?.attempts.length ?? 0) >= 2,
      );
      const [d] = await deliveries(stack, token, made.body.id as string);
      expect(d!.attempts[0]).toMatchObject({
        statusCode: null,
        error: "refused: 127.0.0.1 is a private address (127.0.0.1)",
        responseExcerpt: "",
      });
      expect(receiver.received).toEqual([]);
    } finally {
      await stack.stop();
      await receiver.stop();
    }
  }, 30_000);
});
