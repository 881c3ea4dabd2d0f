// test-runner: alone
// Scale-out on Redis + PostgreSQL: two daemons, three API processes, two SMTP fronts and two
// workers, every one its own process, sharing one Redis and one PostgreSQL of the test's own.
// Every limit holds across all of them: the organization quota, the IP limit, the recipient
// guards, and 40 releases per second per lane in total.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { Lane, type Release } from "../gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../limiterclient/client";
import { pacing } from "../testkit/pacing";
import { viaNodemailer } from "../testkit/smtpclients";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import {
  freePort,
  getJson,
  pool,
  type Proc,
  type RedisServer,
  runBun,
  runToEnd,
  sendEmail,
  startRedis,
  tempDir,
  waitFor,
  waitHttpOk,
} from "../testkit/testkit";
import { limiterCredential } from "../config/config";

const canConnect = (port: number) =>
  new Promise<boolean>((done) => {
    const s = connect(port, "127.0.0.1", () => {
      s.destroy();
      done(true);
    });
    s.on("error", () => done(false));
  });

describe("two daemons, three APIs, two SMTP fronts, two workers on Redis + PostgreSQL", () => {
  let pg: PostgresServer;
  let redis: RedisServer;
  const procs: Proc[] = [];
  const limiters: string[] = [];
  const apis: string[] = [];
  const smtpPorts: number[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    [pg, redis] = await Promise.all([startPostgres(), startRedis()]);
    const dataDir = tempDir();
    env = {
      DATA_DIR: dataDir,
      REDIS_URL: redis.url,
      DATABASE_URL: pg.url,
      TRUST_PROXY: "127.0.0.1",
      WORKER_CONCURRENCY: "32",
    };
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      limiters.push(`http://127.0.0.1:${port}`);
      procs.push(runBun("cmd/limiterd/index.ts", [], { ...env, LIMITER_PORT: String(port) }));
    }
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      apis.push(`http://127.0.0.1:${port}`);
      procs.push(runBun("cmd/api/index.ts", [], { ...env, LIMITER_URL: limiters[i % 2]!, API_PORT: String(port) }));
    }
    for (const api of apis) await waitHttpOk(`${api}/readyz`, 30_000);
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      smtpPorts.push(port);
      procs.push(
        runBun("cmd/smtp/index.ts", [], {
          ...env,
          LIMITER_URL: limiters[i]!,
          API_URL: apis[i]!,
          SMTP_PORT: String(port),
        }),
      );
      procs.push(runBun("cmd/worker/index.ts", [], { ...env, LIMITER_URL: limiters[i]! }));
    }
    for (const port of smtpPorts) await waitFor(`smtp on ${port}`, () => canConnect(port), 20_000);
  }, 90_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop("SIGKILL")));
    await Promise.all([redis?.stop(), pg?.stop()]);
  });

  async function org(slug: string, plan: string): Promise<string> {
    const admin = (...args: string[]) => runToEnd("cmd/admin/index.ts", args, { ...env, LIMITER_URL: limiters[1]! });
    expect((await admin("org", "create", slug, "--plan", plan)).code).toBe(0);
    expect((await admin("domain", "add", slug, `${slug}.example`, "--verified")).code).toBe(0);
    return (await admin("token", "create", slug)).stdout.trim();
  }

  test("the quota: 300 requests of a free organization over three APIs and two daemons admit exactly 100", async () => {
    const token = await org("quota", "free");
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 300 }, (_, i) => getJson(`${apis[i % 3]}/api/v1/tags`, token, true)),
    );
    const refill = Math.floor((performance.now() - t0) / 600); // one token every 600 ms
    const ok = answers.filter((a) => a.status === 200).length;
    console.log(`quota across 3 APIs: ${ok} of 300 admitted (refill allowance ${refill})`);
    expect(ok).toBeGreaterThanOrEqual(100);
    expect(ok).toBeLessThanOrEqual(100 + refill);
    expect(answers.filter((a) => a.status === 429).length).toBe(300 - ok);
  });

  test("the IP limit: one client IP over three APIs gets 500 per second, not 500 per API", async () => {
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 900 }, (_, i) =>
        fetch(`${apis[i % 3]}/api/v1/tags`, { headers: { "X-Forwarded-For": "198.51.100.9" } }).then((r) => r.status),
      ),
    );
    const refill = Math.floor((performance.now() - t0) / 2); // one token every 2 ms
    const served = answers.filter((s) => s === 401).length; // no token: 401, but counted against the IP
    console.log(`IP limit across 3 APIs: ${served} of 900 counted in (refill allowance ${refill})`);
    expect(served).toBeGreaterThanOrEqual(500);
    expect(served).toBeLessThanOrEqual(500 + refill);
    expect(answers.filter((s) => s === 429).length).toBe(900 - served);
  });

  test("the guards: 12 sends to one mailbox over the APIs and both SMTP fronts accept exactly 5", async () => {
    const token = await org("guards", "enterprise");
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        if (i % 3 === 2) {
          const o = await viaNodemailer({
            port: smtpPorts[i % 2]!,
            user: "guards",
            pass: token,
            mailFrom: "a@guards.example",
            to: ["Same.Person+x@dest.example"],
            from: "a@guards.example",
            subject: `s${i}`,
            text: "t",
          });
          return o.queued
            ? "accepted"
            : o.failure?.code === 452 && o.failure.status === "4.2.1"
              ? "limited"
              : `other ${JSON.stringify(o.failure)}`;
        }
        const res = await sendEmail(
          apis[i % 3]!,
          token,
          { from: "a@guards.example", to: "same.person@dest.example", subject: `s${i}`, text: "t" },
          {},
          true,
        );
        return res.status === 202
          ? "accepted"
          : res.status === 429 && res.body.code === "RECIPIENT_RATE_LIMITED"
            ? "limited"
            : `other ${res.status}`;
      }),
    );
    expect(outcomes.filter((o) => o === "accepted")).toHaveLength(5);
    expect(outcomes.filter((o) => o === "limited")).toHaveLength(7);
  });

  test("the lanes: 40 per second per lane in total, each message delivered once", async () => {
    const token = await org("lanes", "enterprise");
    const since = Date.now();
    const sent = await pool(400, 16, async (i) => {
      const res = await sendEmail(
        apis[i % 3]!,
        token,
        {
          from: "a@lanes.example",
          to: `delivered+${i}@fixtures.test`,
          subject: `l${i}`,
          text: "t",
          lane: i % 2 ? "bulk" : "transactional",
        },
        {},
        true,
      );
      expect(res.status).toBe(202);
      return res.body.id as string;
    });
    const backlogged = Date.now();
    const releases = async (lane: Lane): Promise<Release[]> =>
      (
        await Promise.all(
          limiters.map(
            async (url) =>
              (
                await limiterClients(url, limiterCredential(env)).lanes.listReleases({ lane, sinceMs: BigInt(since) })
              ).releases,
          ),
        )
      )
        .flat()
        .sort((a, b) => Number(a.slotAtMs - b.slotAtMs));
    // Polled every half second: reading every release from both daemons at a fast pace would take
    // the very CPU their lane schedulers are being measured on.
    await waitFor(
      "400 releases",
      async () => (await releases(Lane.TRANSACTIONAL)).length + (await releases(Lane.BULK)).length >= 400,
      20_000,
      500,
    );
    for (const lane of [Lane.TRANSACTIONAL, Lane.BULK]) {
      const rs = (await releases(lane)).filter((r) => Number(r.slotAtMs) >= backlogged);
      expect(new Set(rs.map((r) => r.messageId)).size).toBe(rs.length);
      const p = pacing(rs);
      console.log(
        `lane ${Lane[lane]} over two daemons: slots per second ${JSON.stringify(p.perSecond)}, most in a sliding second ${p.maxSliding}`,
      );
      // The store stamps the slots, whichever daemon releases: never more than 40 in a second.
      for (const n of p.perSecond.slice(0, -1)) {
        expect(n).toBeGreaterThanOrEqual(39);
        expect(n).toBeLessThanOrEqual(40);
      }
      expect(p.maxSliding).toBeLessThanOrEqual(40);
    }
    // Delivered once each, by whichever worker leased it.
    await waitFor(
      "all 400 delivered",
      async () => {
        const views = await Promise.all(
          sent.map((id, i) => getJson(`${apis[i % 3]}/api/v1/emails/${id}`, token, true)),
        );
        return views.every((v) => v.body.status === "delivered");
      },
      30_000,
    );
    const views = await Promise.all(sent.map((id, i) => getJson(`${apis[i % 3]}/api/v1/emails/${id}`, token, true)));
    for (const v of views) expect(v.body.attempts).toBe(1);
  }, 60_000);
});
