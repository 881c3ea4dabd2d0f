// test-runner: alone
// The lanes' pacing, measured over real time on a running daemon process: releases are read
// back from the daemon (LaneService.ListReleases), their slots per second, and how long before
// its slot each was released.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Lane, type Release } from "../gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../limiterclient/client";
import { pacing } from "../testkit/pacing";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import {
  freePort,
  pool,
  type RedisClusterServer,
  type RedisServer,
  runBun,
  sendEmail,
  type Stack,
  startRedis,
  startRedisCluster,
  startStack,
  waitFor,
} from "../testkit/testkit";

const PROXY = { TRUST_PROXY: "127.0.0.1" };

async function releases(stack: Stack, limiterUrls: string[], lane: Lane, sinceMs: number): Promise<Release[]> {
  const all = await Promise.all(
    limiterUrls.map(
      async (url) =>
        (await limiterClients(url, stack.credential).lanes.listReleases({ lane, sinceMs: BigInt(sinceMs) })).releases,
    ),
  );
  return all.flat().sort((a, b) => Number(a.slotAtMs - b.slotAtMs));
}

async function backlog(stack: Stack, token: string, n: number, body: (i: number) => Record<string, unknown>) {
  const answers = await pool(n, 32, (i) =>
    sendEmail(stack.apiUrls[i % stack.apiUrls.length]!, token, body(i), {}, true),
  );
  const refused = answers.filter((a) => a.status !== 202);
  if (refused.length > 0)
    throw new Error(`backlog: ${refused.length} refused, e.g. ${JSON.stringify(refused[0]!.body)}`);
  return answers.map((a) => a.body.id as string);
}

const fixture = (slug: string, lane?: string) => (i: number) => ({
  from: `App <app@${slug}.example>`,
  to: `delivered+${i}@fixtures.test`,
  subject: `message ${i}`,
  text: "hello",
  ...(lane ? { lane } : {}),
});

describe("lane pacing on the embedded store", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: PROXY });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  test("a backlog of 400 transactional messages leaves at 40 per second", async () => {
    const token = await stack.org("pace", "enterprise");
    const started = Date.now();
    const ids = await backlog(stack, token, 400, fixture("pace"));
    // Measured from the moment the whole backlog is queued: from then on the lane is backlogged.
    const backlogged = Date.now();
    await waitFor(
      "400 releases",
      async () => (await releases(stack, [stack.limiterUrl], Lane.TRANSACTIONAL, started)).length >= 400,
      15_000,
    );
    const all = await releases(stack, [stack.limiterUrl], Lane.TRANSACTIONAL, started);
    expect(new Set(all.map((r) => r.messageId))).toEqual(new Set(ids));
    const rs = all.filter((r) => Number(r.slotAtMs) >= backlogged);
    const p = pacing(rs);
    console.log(
      `transactional, 400: slots per second ${JSON.stringify(p.perSecond)}, most in any second ${p.maxSliding}, released ${p.lead.min} to ${p.lead.max} ms before the slot`,
    );
    // Every whole second holds 40 slots (39 where a stall of the daemon longer than the lane's
    // 50 ms lead made the run start again; the last second is partial); never more than 40.
    for (const n of p.perSecond.slice(0, -1)) {
      expect(n).toBeGreaterThanOrEqual(39);
      expect(n).toBeLessThanOrEqual(40);
    }
    expect(p.maxSliding).toBeLessThanOrEqual(40);
    expect(p.perSecond.length).toBeGreaterThanOrEqual(8);
    expect(p.lead.min).toBeGreaterThanOrEqual(0);
    expect(p.lead.max).toBeLessThanOrEqual(50);
  }, 30_000);

  test("behind 2,000 bulk messages, a transactional message's slot comes within 50 ms", async () => {
    const [a, b] = [await stack.org("bulk-a", "enterprise"), await stack.org("bulk-b", "enterprise")];
    await backlog(stack, a, 1_000, fixture("bulk-a", "bulk"));
    await backlog(stack, b, 1_000, fixture("bulk-b", "bulk"));
    const lanes = (await limiterClients(stack.limiterUrl, stack.credential).lanes.getLanes({})).lanes;
    // (The bulk lane releases a second of slots ahead: 41 of them are no longer waiting.)
    expect(Number(lanes.find((l) => l.lane === Lane.BULK)!.depth)).toBeGreaterThan(1_700);

    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = await sendEmail(
        stack.apiUrls[0]!,
        a,
        { from: "App <app@bulk-a.example>", to: `code${i}@example.org`, subject: "Your code", text: "123456" },
        {},
        true,
      );
      expect(sent.status).toBe(202);
      const id = sent.body.id as string;
      const message = await (
        await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, {
          headers: { Authorization: `Bearer ${a}`, "X-Forwarded-For": "10.99.0.1" },
        })
      ).json();
      const acceptedAt = Date.parse((message as { createdAt: string }).createdAt);
      await waitFor(
        "the release",
        async () =>
          (await releases(stack, [stack.limiterUrl], Lane.TRANSACTIONAL, acceptedAt)).some((r) => r.messageId === id),
        2_000,
      );
      const r = (await releases(stack, [stack.limiterUrl], Lane.TRANSACTIONAL, acceptedAt)).find(
        (x) => x.messageId === id,
      )!;
      delays.push(Number(r.slotAtMs) - acceptedAt);
      await Bun.sleep(37);
    }
    console.log(`transactional slot after the accept, behind a bulk backlog of ~2000: ${delays.join(", ")} ms`);
    for (const d of delays) expect(d).toBeLessThanOrEqual(50);
  }, 60_000);

  test("behind 400 transactional messages of one organization, another organization's message's slot comes within 100 ms", async () => {
    const [big, small] = [await stack.org("big", "enterprise"), await stack.org("small", "free")];
    await backlog(stack, big, 400, fixture("big"));
    const sent = await sendEmail(
      stack.apiUrls[0]!,
      small,
      { from: "App <app@small.example>", to: "someone@example.org", subject: "Hi", text: "x" },
      {},
      true,
    );
    const id = sent.body.id as string;
    const since = Date.now() - 5_000;
    await waitFor(
      "the small organization's release",
      async () =>
        (await releases(stack, [stack.limiterUrl], Lane.TRANSACTIONAL, since)).some((r) => r.messageId === id),
      2_000,
    );
    const message = (await (
      await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, { headers: { Authorization: `Bearer ${small}` } })
    ).json()) as { createdAt: string };
    const r = (await releases(stack, [stack.limiterUrl], Lane.TRANSACTIONAL, since)).find((x) => x.messageId === id)!;
    const delay = Number(r.slotAtMs) - Date.parse(message.createdAt);
    console.log(`another organization's message behind 400 of one organization: its slot ${delay} ms after the accept`);
    expect(delay).toBeLessThanOrEqual(100);
  }, 30_000);
});

for (const kind of ["one Redis", "a Redis Cluster"] as const) {
  describe(`two daemons on ${kind}, records in PostgreSQL`, () => {
    let pg: PostgresServer;
    let redis: RedisServer | undefined;
    let cluster: RedisClusterServer | undefined;
    let stack: Stack;
    let second: ReturnType<typeof runBun>;
    let secondUrl: string;
    beforeAll(async () => {
      pg = await startPostgres();
      let hot: { redisUrl: string } | { redisClusterNodes: string[] };
      if (kind === "one Redis") {
        redis = await startRedis();
        hot = { redisUrl: redis.url };
      } else {
        cluster = await startRedisCluster();
        hot = { redisClusterNodes: cluster.nodes };
      }
      stack = await startStack({ ...hot, env: { ...PROXY, DATABASE_URL: pg.url } });
      const port = await freePort();
      secondUrl = `http://127.0.0.1:${port}`;
      second = runBun("cmd/limiterd/index.ts", [], { ...stack.env, LIMITER_PORT: String(port) });
      await waitFor(
        "the second daemon",
        async () => (await limiterClients(secondUrl, stack.credential).lanes.getLanes({})).lanes.length === 2,
      );
    });
    afterAll(async () => {
      await second?.stop("SIGKILL");
      await stack?.stop();
      await Promise.all([redis?.stop(), cluster?.stop(), pg?.stop()]);
    });

    test("release 40 per second per lane in total", async () => {
      const token = await stack.org("shared", "enterprise");
      const started = Date.now();
      await backlog(stack, token, 200, fixture("shared"));
      const backlogged = Date.now();
      await waitFor(
        "200 releases",
        async () => (await releases(stack, [stack.limiterUrl, secondUrl], Lane.TRANSACTIONAL, started)).length >= 200,
        15_000,
      );
      const rs = await releases(stack, [stack.limiterUrl, secondUrl], Lane.TRANSACTIONAL, backlogged);
      expect(new Set(rs.map((r) => r.messageId)).size).toBe(rs.length); // each released once
      const p = pacing(rs);
      console.log(
        `two daemons on ${kind}, 200: slots per second ${JSON.stringify(p.perSecond)}, most in any second ${p.maxSliding}`,
      );
      // The slots are the store's, whichever daemon releases: never more than 40 in a second.
      for (const n of p.perSecond.slice(0, -1)) {
        expect(n).toBeGreaterThanOrEqual(39);
        expect(n).toBeLessThanOrEqual(40);
      }
      expect(p.maxSliding).toBeLessThanOrEqual(40);
    }, 30_000);
  });
}
