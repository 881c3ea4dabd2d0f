// test-runner: alone
// A quiet idle daemon: with empty lanes nothing polls Redis many times a second (the lanes and
// the lease streams wait for the store's signals, the background loops rest while they find
// nothing), and the first message after the quiet is released on the signal of its acceptance,
// not on a poll. limiterd, an API and a worker as processes; Redis's own command counts.
// limiterd's CPU while idle and the first message's latency are measured by `npm run bench:idle`.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../limiterclient/client";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

const QUIET_MS = 10_000;

/** Every command Redis has served since it started (INFO commandstats: those run inside scripts included). */
async function redisCalls(port: number): Promise<number> {
  const p = Bun.spawn(["redis-cli", "-p", String(port), "info", "commandstats"], { stdout: "pipe" });
  const out = await new Response(p.stdout).text();
  return [...out.matchAll(/^cmdstat_[\w|]+:calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

for (const deployment of ["embedded", "redis"] as const) {
  describe(`an idle limiterd (${deployment} store)`, () => {
    let redis: RedisServer | undefined;
    let stack: Stack;
    let token: string;
    beforeAll(async () => {
      if (deployment === "redis") redis = await startRedis();
      stack = await startStack({ redisUrl: redis?.url, workers: 1, env: { TRUST_PROXY: "127.0.0.1" } });
      token = await stack.org("quiet", "enterprise");
    }, 60_000);
    afterAll(async () => {
      await stack?.stop();
      await redis?.stop();
    });

    test(`quiet for ${QUIET_MS / 1_000} s${deployment === "redis" ? " (under 10 Redis commands a second)" : ""}, then the first message is released on its acceptance's signal and delivered`, async () => {
      await Bun.sleep(5_000); // the start's own work (migrations, the loops' first rounds) settles
      const before = redis ? await redisCalls(redis.port) : 0;
      await Bun.sleep(QUIET_MS);
      const perSecond = redis ? ((await redisCalls(redis.port)) - before - 1) / (QUIET_MS / 1_000) : 0;

      const sent = await sendEmail(
        stack.apiUrls[0]!,
        token,
        { from: "App <app@quiet.example>", to: "first@example.org", subject: "After the quiet", text: "hello" },
        {},
        true,
      );
      expect(sent.status).toBe(202);
      const id = sent.body.id as string;
      const acceptedAt = Date.now();
      await waitFor("the delivery", async () => existsSync(join(stack.dataDir, "sink", `${id}.eml`)), 10_000, 10);
      const { releases } = await limiterClients(stack.limiterUrl, stack.credential).lanes.listReleases({
        lane: Lane.TRANSACTIONAL,
        sinceMs: BigInt(acceptedAt - 5_000),
      });
      const release = releases.find((r) => r.messageId === id);
      expect(release).toBeDefined();
      const releasedAfterMs = Number(release!.releasedAtMs) - acceptedAt;
      console.log(
        `idle ${deployment}: ${redis ? `${perSecond.toFixed(2)} Redis commands a second; ` : ""}the first message released ${releasedAfterMs} ms after its 202 came back`,
      );
      if (redis) expect(perSecond).toBeLessThan(10);
      // An empty lane looks again on its own only every 30 s: a release within a second is the signal's.
      expect(releasedAfterMs).toBeLessThan(1_000);
    }, 60_000);
  });
}
