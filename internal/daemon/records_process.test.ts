// test-runner: alone
// The split of state over separate processes: records in PostgreSQL (a server this file
// starts), hot state in Redis (one of its own), limiterd, API and worker processes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Redis } from "ioredis";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { keys } from "../hotstore/redis/layout";
import { limiterClients } from "../limiterclient/client";
import { Db } from "../records/db";
import { MIGRATIONS, migrate } from "../records/migrations";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import {
  freePort,
  getJson,
  pool,
  type RedisServer,
  runBun,
  sendEmail,
  type Stack,
  startRedis,
  startStack,
  tempDir,
  waitFor,
} from "../testkit/testkit";
import { clientCredential } from "../plane/secret";

let pg: PostgresServer;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.stop();
});

const usedMemory = async (redis: Redis) => Number(/used_memory:(\d+)/.exec(await redis.info("memory"))![1]);

/** Counts keys by pattern with SCAN (never KEYS on a server under load). */
async function countKeys(redis: Redis, pattern: string): Promise<number> {
  let n = 0;
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1_000);
    cursor = next;
    n += found.length;
  } while (cursor !== "0");
  return n;
}

/** What the daemon and the workers logged of one message, and their warnings: why a message went out twice. */
function whatTheProcessesSaid(stack: Stack, id: string): string {
  return [stack.limiterd, ...stack.workers]
    .flatMap((p) => `${p.stdout()}\n${p.stderr()}`.split("\n"))
    .filter((line) => line.includes(id) || line.includes('"level":"warn"') || line.includes('"level":"error"'))
    .join("\n");
}

describe("Redis + PostgreSQL: 20,000 messages", () => {
  let redisServer: RedisServer;
  let redis: Redis;
  let stack: Stack;
  beforeAll(async () => {
    redisServer = await startRedis();
    redis = new Redis(redisServer.url);
    stack = await startStack({
      redisUrl: redisServer.url,
      env: {
        DATABASE_URL: await pg.newDatabase(),
        TRUST_PROXY: "127.0.0.1",
        LANE_RATE: "1000",
        WORKER_CONCURRENCY: "128",
      },
    });
  });
  afterAll(async () => {
    redis?.disconnect();
    await stack?.stop();
    await redisServer?.stop();
  });

  test("sent and delivered: Redis keeps no message afterwards, every history is read from PostgreSQL through the API", async () => {
    const ORGS = 25;
    const PER_ORG = 800;
    const tokens = await pool(ORGS, 5, (i) => stack.org(`bulk-${i}`, "enterprise"));
    await waitFor(
      "the IP buckets of the set-up to expire",
      async () => (await countKeys(redis, keys.ipBucket("*"))) === 0,
      5_000,
    );
    const baseline = await usedMemory(redis);

    // 20,000 sends through the API (half transactional, half bulk, all to fixtures), no worker yet.
    const t0 = performance.now();
    const sent = await pool(ORGS * PER_ORG, 32, async (i) => {
      const org = i % ORGS;
      const res = await sendEmail(
        stack.apiUrls[0]!,
        tokens[org]!,
        {
          from: `app@bulk-${org}.example`,
          to: `delivered+${i}@fixtures.test`,
          subject: `m${i}`,
          text: "x".repeat(200),
          lane: i % 2 ? "bulk" : "transactional",
        },
        {},
        true,
      );
      expect(res.status).toBe(202);
      return { org, id: res.body.id as string };
    });
    const acceptSeconds = (performance.now() - t0) / 1000;
    const queued = await usedMemory(redis);
    const messageKeys = await countKeys(redis, keys.message("*", "*"));
    console.log(
      `20,000 accepted in ${acceptSeconds.toFixed(1)} s (${Math.round(20_000 / acceptSeconds)}/s); Redis used_memory ${baseline} -> ${queued} bytes: ${Math.round((queued - baseline) / 20_000)} bytes per queued message; ${messageKeys} message keys`,
    );
    expect(messageKeys).toBeGreaterThan(0);

    // Workers deliver; the history is written to PostgreSQL and the messages leave Redis.
    stack.startWorker();
    stack.startWorker();
    const lanes = limiterClients(stack.limiterUrl, stack.credential).lanes;
    await waitFor(
      "every message delivered and settled",
      async () => {
        const { lanes: l } = await lanes.getLanes({});
        const busy = l.some((x) => x.depth + x.ready + x.inFlight + x.deferred > 0n);
        return !busy && (await redis.zcard(keys.outbox())) === 0;
      },
      120_000,
    );
    const deliverSeconds = (performance.now() - t0) / 1000 - acceptSeconds;
    expect(await countKeys(redis, keys.message("*", "*"))).toBe(0);
    await waitFor(
      "the IP buckets of the sends to expire",
      async () => (await countKeys(redis, keys.ipBucket("*"))) === 0,
      5_000,
    );
    // Redis shrinks its key tables (sized for the 40,000 keys, about 1 MB) in its background
    // cron, a moment after the keys go: what is left is measured once that has run.
    let after = 0;
    await waitFor(
      "Redis to hold nothing of the messages",
      async () => {
        after = await usedMemory(redis);
        return after - baseline < 1_000_000;
      },
      15_000,
    ).catch(() => {});
    console.log(`after delivery: used_memory ${after} bytes (baseline ${baseline}, +${after - baseline})`);
    expect(after - baseline).toBeLessThan(1_000_000);
    for (const lane of [Lane.TRANSACTIONAL, Lane.BULK]) expect(await redis.llen(keys.ready(lane))).toBe(0);

    // Every message's history, through the API (from PostgreSQL now).
    const read = await pool(sent.length, 32, async (k) => {
      const { org, id } = sent[k]!;
      const res = await getJson(`${stack.apiUrls[0]}/api/v1/emails/${id}`, tokens[org]!, true);
      expect(res.status).toBe(200);
      if (res.body.attempts !== 1) console.log(`${id} was leased more than once:\n${whatTheProcessesSaid(stack, id)}`);
      expect(res.body).toMatchObject({ id, status: "delivered", attempts: 1 });
      expect((res.body.events as { status: string }[]).map((e) => e.status)).toEqual([
        "queued",
        "queued",
        "sending",
        "delivered",
      ]);
      return res.body;
    });
    expect(read).toHaveLength(20_000);
    console.log(
      `delivered and settled ${deliverSeconds.toFixed(1)} s after the last accept; 20,000 histories read in ${((performance.now() - t0) / 1000 - acceptSeconds - deliverSeconds).toFixed(1)} s`,
    );
    const db = await Db.open({ url: stack.env.DATABASE_URL, sqliteFile: "" });
    const [{ n }] = await db.run((sql) => sql`SELECT COUNT(*) AS n FROM messages WHERE status = 3`);
    expect(Number(n)).toBe(20_000);
    await db.close();
  }, 300_000);
});

describe("Redis + PostgreSQL: the projection and the records' availability", () => {
  let redisServer: RedisServer;
  let redis: Redis;
  let stack: Stack;
  beforeAll(async () => {
    redisServer = await startRedis();
    redis = new Redis(redisServer.url);
    stack = await startStack({ redisUrl: redisServer.url, workers: 1, env: { DATABASE_URL: await pg.newDatabase() } });
  });
  afterAll(async () => {
    redis?.disconnect();
    await stack?.stop();
    await redisServer?.stop();
  });

  test("Redis FLUSHALL while the service runs: an existing token is admitted with its plan's policy, a revoked one stays refused", async () => {
    const token = await stack.org("flushed", "premium");
    const revoked = (await stack.admin("token", "create", "flushed")).stdout.trim();
    expect((await stack.admin("token", "revoke", revoked)).code).toBe(0);
    const api = stack.apiUrls[0]!;
    expect((await getJson(`${api}/api/v1/tags`, token)).headers.get("RateLimit")).toBe('"premium";r=699;t=1');
    expect((await getJson(`${api}/api/v1/tags`, revoked)).status).toBe(401);

    await redis.flushall();
    const after = await getJson(`${api}/api/v1/tags`, token);
    expect(after.status).toBe(200);
    expect(after.headers.get("RateLimit-Policy")).toBe('"premium";q=700;w=60');
    // The bucket went with the flush: a full one, less this request.
    expect(after.headers.get("RateLimit")).toBe('"premium";r=699;t=1');
    const refused = await getJson(`${api}/api/v1/tags`, revoked);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("INVALID_TOKEN");
    // Sending works again too: the organization's verified domain came back with the projection.
    const sent = await sendEmail(api, token, {
      from: "a@flushed.example",
      to: "delivered@fixtures.test",
      subject: "s",
      text: "t",
    });
    expect(sent.status).toBe(202);
  });

  test("PostgreSQL stopped during sends: 503 with a JSON body where the records are needed, never a 500; nothing accepted is lost; recovery by itself", async () => {
    const token = await stack.org("pgdown", "enterprise");
    const api = stack.apiUrls[0]!;
    const accepted: string[] = [];
    const answers: { status: number; json: boolean }[] = [];
    let i = 0;
    const send = async () => {
      const res = await sendEmail(api, token, {
        from: "a@pgdown.example",
        to: `delivered+${++i}@fixtures.test`,
        subject: `n${i}`,
        text: "t",
      });
      answers.push({ status: res.status, json: typeof res.body.code === "string" || typeof res.body.id === "string" });
      if (res.status === 202) accepted.push(res.body.id as string);
      return res;
    };
    for (let k = 0; k < 20; k++) await send();

    await pg.halt();
    // Sends need only the hot store: they go on. What needs the records answers 503, as JSON.
    for (let k = 0; k < 40; k++) await send();
    const tags = await getJson(`${api}/api/v1/tags`, token);
    expect(tags.status).toBe(503);
    expect(tags.body).toMatchObject({ code: "LIMITER_UNAVAILABLE" });
    const unknown = await getJson(`${api}/api/v1/tags`, `mc_${"B".repeat(43)}`);
    expect(unknown.status).toBe(503); // an unknown token cannot be told from a valid one without the records: fail closed
    expect(unknown.body).toMatchObject({ code: "LIMITER_UNAVAILABLE" });
    await Bun.sleep(1_500); // deliveries go on meanwhile; their history waits in Redis
    const pending = await redis.zcard(keys.outbox());
    expect(pending).toBeGreaterThan(0);

    await pg.start();
    await waitFor(
      "the records back in use",
      async () => (await getJson(`${api}/api/v1/tags`, token)).status === 200,
      30_000,
    );
    for (let k = 0; k < 20; k++) await send();
    expect(answers.every((a) => a.status !== 500 && a.json)).toBe(true);
    expect(accepted.length).toBe(80);

    // Everything accepted is delivered, and its history reaches PostgreSQL.
    await waitFor(
      "every accepted message delivered and written",
      async () => (await redis.zcard(keys.outbox())) === 0 && (await countKeys(redis, keys.message("*", "*"))) === 0,
      60_000,
    );
    for (const id of accepted)
      expect((await getJson(`${api}/api/v1/emails/${id}`, token)).body.status).toBe("delivered");
  }, 120_000);
});

describe("migrations at start", () => {
  test("a database at the previous version upgrades when limiterd starts; two daemons started together migrate once", async () => {
    const url = await pg.newDatabase();
    const db = await Db.open({ url, sqliteFile: "" });
    const latest = MIGRATIONS.at(-1)!.version;
    await migrate(db, { upTo: latest - 1 });
    await db.run(
      (sql) =>
        sql`INSERT INTO organizations (id, slug, plan, version, created_ms) VALUES ('org_0123456789abcdef', 'old', 3, 1, 0)`,
    );

    const redisServer = await startRedis();
    const dataDir = tempDir();
    const ports = [await freePort(), await freePort()];
    const daemons = ports.map((port) =>
      runBun("cmd/limiterd/index.ts", [], {
        DATA_DIR: dataDir,
        REDIS_URL: redisServer.url,
        DATABASE_URL: url,
        LIMITER_PORT: String(port),
      }),
    );
    try {
      for (const port of ports) {
        await waitFor(`limiterd on ${port}`, async () => {
          await limiterClients(`http://127.0.0.1:${port}`, clientCredential(undefined, dataDir)).health.check({});
          return true;
        });
      }
      const versions = await db.run((sql) => sql`SELECT version FROM schema_migrations ORDER BY version`);
      expect(versions.map((r: { version: unknown }) => Number(r.version))).toEqual(MIGRATIONS.map((m) => m.version));
      for (const port of ports) {
        const org = await limiterClients(
          `http://127.0.0.1:${port}`,
          clientCredential(undefined, dataDir),
        ).directory.getOrganization({ slug: "old" });
        expect(org.organization).toMatchObject({ id: "org_0123456789abcdef", plan: 3 });
      }
      // Neither daemon said that it could not migrate.
      for (const d of daemons) expect(d.stderr()).not.toContain("cannot open the records");
    } finally {
      await Promise.all(daemons.map((d) => d.stop("SIGKILL")));
      await redisServer.stop();
      await db.close();
    }
  }, 60_000);
});
