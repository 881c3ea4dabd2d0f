// test-runner: alone
// A quiet idle daemon: with empty lanes, limiterd uses under 1% of a core and Redis serves under
// 10 commands a second on its behalf (measured over 30 s), and the first message after the idle
// period leaves its lane (gets its slot) within 30 ms of its acceptance; when the worker wrote it
// to the sink is printed. The idle period here is 35 s (what CI affords); the scheduler's unit
// tests cover an idle hour on an injected clock.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../limiterclient/client";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

const MEASURE_MS = 30_000;
const SETTLE_MS = 5_000;

/** CPU seconds (user + system) a process has used, from /proc (clock ticks of 1/100 s). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Bun.file(`/proc/${pid}/stat`).text();
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Commands Redis has served since it started, by command (INFO commandstats), the INFO calls left out. */
async function redisCalls(port: number): Promise<Map<string, number>> {
  const p = Bun.spawn(["redis-cli", "-p", String(port), "info", "commandstats"], { stdout: "pipe" });
  const out = await new Response(p.stdout).text();
  const calls = new Map<string, number>();
  for (const m of out.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)) if (m[1] !== "info") calls.set(m[1]!, Number(m[2]));
  return calls;
}

/** Sends one transactional message after the idle period; returns ms from acceptance to its release and to the sink. */
async function firstAfterIdle(stack: Stack, token: string, slug: string) {
  const sent = await sendEmail(
    stack.apiUrls[0]!,
    token,
    { from: `App <app@${slug}.example>`, to: "first@example.org", subject: "After the quiet", text: "hello" },
    {},
    true,
  );
  expect(sent.status).toBe(202);
  const id = sent.body.id as string;
  const info = (await (
    await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, {
      headers: { Authorization: `Bearer ${token}`, "X-Forwarded-For": "10.99.0.9" },
    })
  ).json()) as { createdAt: string };
  const acceptedAt = Date.parse(info.createdAt);
  const file = join(stack.dataDir, "sink", `${id}.eml`);
  await waitFor("the delivery", async () => statSync(file, { throwIfNoEntry: false }) !== undefined, 5_000, 5);
  const released = (
    await limiterClients(stack.limiterUrl).lanes.listReleases({
      lane: Lane.TRANSACTIONAL,
      sinceMs: BigInt(acceptedAt - 1_000),
    })
  ).releases.find((r) => r.messageId === id)!;
  return { released: Number(released.slotAtMs) - acceptedAt, delivered: statSync(file).mtimeMs - acceptedAt };
}

for (const deployment of ["embedded", "redis"] as const) {
  describe(`an idle limiterd (${deployment} store)`, () => {
    let redis: RedisServer | undefined;
    let stack: Stack;
    beforeAll(async () => {
      if (deployment === "redis") redis = await startRedis();
      stack = await startStack({ redisUrl: redis?.url, workers: 1, env: { TRUST_PROXY: "127.0.0.1" } });
    }, 60_000);
    afterAll(async () => {
      await stack?.stop();
      await redis?.stop();
    });

    test(`uses under 1% of a core${deployment === "redis" ? " and under 10 Redis commands a second" : ""}, and the first message after 35 s of quiet leaves within 30 ms`, async () => {
      const token = await stack.org("quiet", "enterprise");
      await Bun.sleep(SETTLE_MS);
      const pid = stack.limiterd.proc.pid;
      const cpu0 = await cpuSeconds(pid);
      const calls0 = redis ? await redisCalls(redis.port) : new Map<string, number>();
      await Bun.sleep(MEASURE_MS);
      const cpu = (await cpuSeconds(pid)) - cpu0;
      const calls1 = redis ? await redisCalls(redis.port) : new Map<string, number>();
      const byCommand = [...calls1].map(([c, n]) => [c, n - (calls0.get(c) ?? 0)] as const).filter(([, n]) => n > 0);
      const perSecond = byCommand.reduce((s, [, n]) => s + n, 0) / (MEASURE_MS / 1_000);
      const first = await firstAfterIdle(stack, token, "quiet");
      console.log(
        `idle limiterd (${deployment}) over ${MEASURE_MS / 1_000} s: CPU ${((cpu / (MEASURE_MS / 1_000)) * 100).toFixed(2)}% of a core` +
          (redis ? `, Redis ${perSecond.toFixed(2)} commands/s ${JSON.stringify(Object.fromEntries(byCommand))}` : "") +
          `; first message after the quiet: released ${first.released} ms, in the sink ${first.delivered.toFixed(1)} ms after its acceptance`,
      );
      expect(cpu / (MEASURE_MS / 1_000)).toBeLessThan(0.01);
      if (redis) expect(perSecond).toBeLessThan(10);
      expect(first.released).toBeLessThanOrEqual(30);
    }, 90_000);
  });
}
