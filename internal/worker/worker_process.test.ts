// Delivery end to end over separate processes: limiterd, api and worker processes, a real
// SMTP relay the test starts, kill -9 of the daemon, of Redis and of a worker.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { simpleParser } from "mailparser";
import { type Relay, startRelay } from "../testkit/relay";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

interface MessageView {
  status: string;
  attempts: number;
  events: { status: string; detail: string }[];
}

async function message(stack: Stack, token: string, id: string): Promise<MessageView> {
  return (await (
    await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, { headers: { Authorization: `Bearer ${token}` } })
  ).json()) as MessageView;
}

async function until(
  stack: Stack,
  token: string,
  id: string,
  status: string,
  timeoutMs = 10_000,
): Promise<MessageView> {
  await waitFor(`${id} to be ${status}`, async () => (await message(stack, token, id)).status === status, timeoutMs);
  return message(stack, token, id);
}

function mail(slug: string, to: string, extra: Record<string, unknown> = {}) {
  return { from: `Acme <no-reply@${slug}.example>`, to, subject: `To ${to}`, html: `<p>Hello ${to}</p>`, ...extra };
}

describe("through a real SMTP relay", () => {
  let relay: Relay;
  let stack: Stack;
  let token: string;
  beforeAll(async () => {
    relay = await startRelay();
    stack = await startStack({ env: { RETRY_BASE_MS: "200", MAX_ATTEMPTS: "3" } });
    stack.startWorker({ SMTP_RELAY_URL: relay.url });
    token = await stack.org("relay", "premium");
  });
  afterAll(async () => {
    await stack?.stop();
    await relay?.stop();
  });

  test("250: delivered, with its From, HTML and Message-ID", async () => {
    const sent = await sendEmail(
      stack.apiUrls[0]!,
      token,
      mail("relay", "Jane <ok@dest.example>", { headers: { "X-Campaign": "welcome" } }),
    );
    expect(sent.status).toBe(202);
    const id = sent.body.id as string;
    const done = await until(stack, token, id, "delivered");
    expect(done.attempts).toBe(1);
    const got = relay.received.find((r) => r.rcpt === "ok@dest.example")!;
    const parsed = await simpleParser(got.raw);
    expect(parsed.messageId).toBe(`<${id}@relay.example>`);
    expect(parsed.from?.text).toBe('"Acme" <no-reply@relay.example>');
    expect(parsed.subject).toBe("To Jane <ok@dest.example>");
    expect(parsed.html).toContain("<p>Hello Jane <ok@dest.example></p>");
    expect(parsed.headers.get("x-campaign")).toBe("welcome");
  });

  test("550: bounced, the mailbox on the organization's suppression list and on cooldown for everyone", async () => {
    const sent = await sendEmail(stack.apiUrls[0]!, token, mail("relay", "bounce@dest.example"));
    const done = await until(stack, token, sent.body.id as string, "bounced");
    expect(done.events.at(-1)!.detail).toContain("550");
    const listed = await sendEmail(stack.apiUrls[0]!, token, mail("relay", "Bounce+2@dest.example"));
    expect([listed.status, listed.body.code]).toEqual([422, "RECIPIENT_SUPPRESSED"]);
    // The spec's cooldown is the mailbox's: another organization's transactional send waits too.
    const other = await stack.org("relay-other", "premium");
    const again = await sendEmail(stack.apiUrls[0]!, other, mail("relay-other", "Bounce+2@dest.example"));
    expect(again.status).toBe(429);
    expect(again.body).toEqual({
      code: "RECIPIENT_RATE_LIMITED",
      message: "This recipient is temporarily rate limited.",
    });
    expect(Number(again.headers.get("Retry-After"))).toBeGreaterThan(3_500);
  });

  test("451: retried with backoff, then delivered", async () => {
    const sent = await sendEmail(stack.apiUrls[0]!, token, mail("relay", "flaky@dest.example"));
    const done = await until(stack, token, sent.body.id as string, "delivered");
    expect(done.attempts).toBe(2);
    expect(done.events.map((e) => e.status)).toContain("deferred");
    expect(relay.received.filter((r) => r.rcpt === "flaky@dest.example")).toHaveLength(1);
  });

  test("451 every time: failed after MAX_ATTEMPTS", async () => {
    const sent = await sendEmail(stack.apiUrls[0]!, token, mail("relay", "busy@dest.example"));
    const done = await until(stack, token, sent.body.id as string, "failed");
    expect(done.attempts).toBe(3);
  });

  test("fixtures are simulated, never sent to the relay", async () => {
    const sent = await sendEmail(stack.apiUrls[0]!, token, mail("relay", "delivered@fixtures.test"));
    const done = await until(stack, token, sent.body.id as string, "delivered");
    expect(done.events.at(-1)!.detail).toBe("simulated: delivered");
    expect(relay.received.some((r) => r.rcpt.endsWith("@fixtures.test"))).toBe(false);
  });
});

describe("a worker killed while holding a lease", () => {
  test("the message is released again after the visibility timeout and delivered by another worker", async () => {
    const relay = await startRelay();
    const stack = await startStack({ env: { VISIBILITY_TIMEOUT_MS: "1500" } });
    try {
      const token = await stack.org("lease", "free");
      const first = stack.startWorker({ SMTP_RELAY_URL: relay.url });
      const sent = await sendEmail(stack.apiUrls[0]!, token, mail("lease", "hang@dest.example"));
      const id = sent.body.id as string;
      await until(stack, token, id, "sending");
      await first.stop("SIGKILL");
      stack.startWorker(); // the file sink
      const done = await until(stack, token, id, "delivered");
      expect(done.attempts).toBe(2);
      expect(done.events.map((e) => e.detail)).toContain("lease expired; back in its lane");
      expect(readdirSync(join(stack.dataDir, "sink"))).toEqual([`${id}.eml`]);
    } finally {
      await stack.stop();
      await relay.stop();
    }
  }, 20_000);
});

for (const backend of ["embedded", "redis"] as const) {
  describe(`kill -9 after a 202 (${backend} store)`, () => {
    let redis: RedisServer | undefined;
    let stack: Stack;
    beforeAll(async () => {
      if (backend === "redis") redis = await startRedis({ aof: true });
      stack = await startStack({ redisUrl: redis?.url });
    });
    afterAll(async () => {
      await stack?.stop();
      await redis?.stop();
    });

    test("every accepted message is delivered after the restart, once", async () => {
      const token = await stack.org("durable", "premium");
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const sent = await sendEmail(
          stack.apiUrls[0]!,
          token,
          mail("durable", `user${i}@dest.example`, { lane: i % 2 ? "bulk" : "transactional" }),
        );
        expect(sent.status).toBe(202);
        ids.push(sent.body.id as string);
      }
      await stack.restartLimiterd();
      if (redis) {
        await redis.restart(); // and Redis itself, from its append-only file
        await waitFor("the API to be ready again", async () => (await fetch(`${stack.apiUrls[0]}/readyz`)).ok);
      }
      stack.startWorker();
      for (const id of ids) await until(stack, token, id, "delivered");
      const files = readdirSync(join(stack.dataDir, "sink")).sort();
      expect(files).toEqual(ids.map((id) => `${id}.eml`).sort());
      for (const id of ids)
        expect(readFileSync(join(stack.dataDir, "sink", `${id}.eml`), "utf8")).toContain(
          `Message-ID: <${id}@durable.example>`,
        );
    }, 30_000);
  });
}
