// test-runner: alone
// Exact lanes under load, on the embedded store and on Redis + PostgreSQL. A campaign to 4,000
// subscribers goes out in the bulk lane while two other organizations send 30 transactional
// messages a second between them through the API, a fourth organization upserts 1,000
// subscribers every 2 s, and a webhook endpoint receives every email.delivered of the campaign;
// one worker writes to the file sink. From the first bulk slot to the last:
// - every whole second holds exactly 40 slots (the first and the last may hold fewer), no
//   sliding 1,000 ms more than 40, and each message was released before its slot, never after;
// - the campaign's span is 3,999 / 40 s within 100 ms: no slot was lost;
// - the sink's write times hold at most 41 of the campaign's messages in any sliding 1,000 ms,
//   the first second included, and none was written before its slot;
// - the transactional sends reach the sink within 1 s of their request at p99, none lost;
// - the campaign keeps at most three pages waiting in the bulk lane (and never let it run dry:
//   a dry lane would have left a gap in the slots, which the span above rules out).
// About 110 s per deployment, over real time: this file runs alone.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { CAMPAIGN_PAGE } from "../daemon/campaign_fanout";
import { limiterClients } from "../limiterclient/client";
import { cpuSeconds } from "../testkit/machine";
import { pacing, spacing } from "../testkit/pacing";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import { type Receiver, startReceiver } from "../testkit/receiver";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

const AUDIENCE = 4_000;
const RATE = 40;
/** Transactional sends a second, in all (15 from each of the two organizations). */
const TX_PER_SECOND = 30;
/** The campaign's 3,999 gaps of 25 ms. */
const SPAN_MS = ((AUDIENCE - 1) * 1_000) / RATE;

type Json = Record<string, any>;

async function api(stack: Stack, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      "X-Forwarded-For": "10.8.0.1",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

const batch = (prefix: string, round: number) => ({
  subscribers: Array.from({ length: 1_000 }, (_, i) => ({
    email: `${prefix}${i}@list.example`,
    name: `Reader ${i}`,
    fields: { round },
  })),
  triggerWorkflows: false,
});

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;

for (const deployment of ["embedded store, SQLite records", "Redis, PostgreSQL records"] as const) {
  describe(`lanes under load: ${deployment}`, () => {
    let redis: RedisServer | undefined;
    let pg: PostgresServer | undefined;
    let receiver: Receiver;
    let stack: Stack;
    beforeAll(async () => {
      receiver = startReceiver();
      let hot = {};
      if (deployment.startsWith("Redis")) {
        [redis, pg] = await Promise.all([startRedis(), startPostgres()]);
        hot = { redisUrl: redis.url };
      }
      stack = await startStack({
        ...hot,
        workers: 1,
        env: { TRUST_PROXY: "127.0.0.1", WEBHOOK_ALLOW_PRIVATE_URLS: "1", ...(pg ? { DATABASE_URL: pg.url } : {}) },
      });
    }, 120_000);
    afterAll(async () => {
      await stack?.stop();
      await Promise.all([redis?.stop(), pg?.stop(), receiver?.stop()]);
    });

    test("40 a second exactly in the bulk lane, at most 41 at the relay; transactional within 1 s at p99, none lost", async () => {
      const [camp, txA, txB, aud] = (await Promise.all(
        ["camp", "tx-a", "tx-b", "aud"].map((slug) => stack.org(slug, "enterprise")),
      )) as [string, string, string, string];
      for (let b = 0; b < AUDIENCE / 1_000; b++)
        expect((await api(stack, camp, "POST", "/api/v1/subscribers/batch", batch(`r${b}-`, 0))).status).toBe(200);
      const hook = await api(stack, camp, "POST", "/api/v1/webhooks", {
        url: `${receiver.url}/delivered`,
        events: ["email.delivered"],
      });
      expect(hook.status).toBe(201);
      const campaign = (
        await api(stack, camp, "POST", "/api/v1/campaigns", {
          name: "Everyone",
          from: "News <news@camp.example>",
          subject: "Hi {{subscriber.name}}",
          text: "Hello",
          audience: { all: true },
        })
      ).body;
      const daemon = limiterClients(stack.limiterUrl, stack.credential);
      const bulkDepth = async () =>
        Number((await daemon.lanes.getLanes({})).lanes.find((l) => l.lane === Lane.BULK)!.depth);

      // The other load, from the campaign's start until it is sent.
      let loading = true;
      const tx: { id: Promise<string | undefined>; sentAt: number }[] = [];
      const transactional = (async () => {
        const t0 = performance.now();
        for (let i = 0; loading; i++) {
          const wait = t0 + (i * 1_000) / TX_PER_SECOND - performance.now();
          if (wait > 0) await Bun.sleep(wait);
          const [token, slug] = i % 2 === 0 ? [txA, "tx-a"] : [txB, "tx-b"];
          const sentAt = Date.now();
          const answer = sendEmail(
            stack.apiUrls[0]!,
            token,
            { from: `App <app@${slug}.example>`, to: `user${i}@example.org`, subject: "Your code", text: "123456" },
            {},
            true,
          );
          tx.push({
            id: answer.then(
              (a) => (a.status === 202 ? (a.body.id as string) : undefined),
              () => undefined,
            ),
            sentAt,
          });
        }
      })();
      const upserts: number[] = [];
      const upserting = (async () => {
        while (loading) {
          const started = performance.now();
          const res = await api(stack, aud, "POST", "/api/v1/subscribers/batch", batch("aud-", upserts.length)).catch(
            () => ({ status: 0 }),
          );
          upserts.push(res.status);
          await Bun.sleep(Math.max(0, 2_000 - (performance.now() - started)));
        }
      })();

      const processes = { limiterd: stack.limiterd, api: stack.apis[0]!, worker: stack.workers[0]! };
      const cpu0 = Object.fromEntries(Object.entries(processes).map(([n, p]) => [n, cpuSeconds(p.proc.pid) ?? 0]));
      const started = Date.now();
      let maxDepth = 0;
      let last: Json = {};
      try {
        expect((await api(stack, camp, "POST", `/api/v1/campaigns/${campaign.id}/send`)).body.status).toBe("sending");
        while (Date.now() - started < 200_000) {
          maxDepth = Math.max(maxDepth, await bulkDepth());
          last = (await api(stack, camp, "GET", `/api/v1/campaigns/${campaign.id}`)).body;
          if (last.status === "sent" && last.stats.delivered === AUDIENCE) break;
          await Bun.sleep(250);
        }
      } finally {
        loading = false;
        await Promise.all([transactional, upserting]);
      }
      const txIds = await Promise.all(tx.map((t) => t.id));
      const seconds = (Date.now() - started) / 1_000;
      // Each process's share of a core over the campaign.
      const cpu = Object.entries(processes)
        .map(([n, p]) => `${n} ${((100 * ((cpuSeconds(p.proc.pid) ?? 0) - cpu0[n]!)) / seconds).toFixed(0)}%`)
        .join(", ");

      const bulk = (await daemon.lanes.listReleases({ lane: Lane.BULK, sinceMs: BigInt(started) })).releases;
      const slots = pacing(bulk);
      const sinkDir = join(stack.dataDir, "sink");
      const writtenAt = (id: string) => statSync(join(sinkDir, `${id}.eml`), { throwIfNoEntry: false })?.mtimeMs;
      await waitFor(
        "every accepted transactional send in the sink",
        async () => txIds.every((id) => id === undefined || writtenAt(id) !== undefined),
        10_000,
        200,
      ).catch(() => {});
      const relay = spacing(bulk.map((r) => writtenAt(r.messageId)).filter((t) => t !== undefined));
      // (A file's time comes from the kernel's coarse clock: a few ms behind the worker's.)
      const writtenEarly = bulk.filter(
        (r) => (writtenAt(r.messageId) ?? Number.POSITIVE_INFINITY) < Number(r.slotAtMs) - 10,
      ).length;
      // A send refused, or never written, counts as never arriving.
      const txDelays = tx
        .map((t, i) =>
          txIds[i] ? (writtenAt(txIds[i]!) ?? Number.POSITIVE_INFINITY) - t.sentAt : Number.POSITIVE_INFINITY,
        )
        .sort((a, b) => a - b);
      const hooked = await waitFor(
        "an email.delivered for every campaign message",
        async () => receiver.at("/delivered").length >= AUDIENCE,
        60_000,
        500,
      ).catch((err: Error) => err);
      const statuses: Record<number, number> = {};
      for (const s of upserts) statuses[s] = (statuses[s] ?? 0) + 1;
      console.log(
        `lanes under load (${deployment}): ${bulk.length} bulk slots, per second ${JSON.stringify(slots.perSecond)}, ` +
          `most in a sliding second ${slots.maxSliding}, span ${slots.spanMs} ms (${SPAN_MS} ms for 3,999 gaps), ` +
          `released ${slots.lead.min} to ${slots.lead.max} ms before the slot; ` +
          `relay: per second ${JSON.stringify(relay.perSecond)}, most in a sliding second ${relay.maxSliding}, written before the slot ${writtenEarly}; ` +
          `transactional: ${txIds.filter(Boolean).length} of ${tx.length} accepted, to the sink p50 ${quantile(txDelays, 0.5).toFixed(0)} ms p99 ${quantile(txDelays, 0.99).toFixed(0)} ms max ${txDelays.at(-1)!.toFixed(0)} ms; ` +
          `bulk lane at most ${maxDepth} waiting; ` +
          `upserts of 1,000 by status ${JSON.stringify(statuses)}; ${receiver.at("/delivered").length} webhook deliveries; ` +
          `CPU of a core over ${seconds.toFixed(0)} s: ${cpu}; load ${loadavg()
            .map((l) => l.toFixed(1))
            .join(" ")}`,
      );

      expect(last).toMatchObject({ status: "sent", stats: { recipients: AUDIENCE, delivered: AUDIENCE } });
      expect(hooked).toBeUndefined();
      expect(new Set(bulk.map((r) => r.messageId)).size).toBe(AUDIENCE);
      for (const n of slots.perSecond.slice(1, -1)) expect(n).toBe(RATE);
      expect(slots.maxSliding).toBeLessThanOrEqual(RATE);
      expect(Math.abs(slots.spanMs - SPAN_MS)).toBeLessThanOrEqual(100);
      expect(slots.lead.min).toBeGreaterThanOrEqual(0); // released before its slot, never after
      expect(relay.maxSliding).toBeLessThanOrEqual(RATE + 1);
      expect(writtenEarly).toBe(0);
      expect(txIds.every((id) => id !== undefined)).toBe(true);
      expect(quantile(txDelays, 0.99)).toBeLessThanOrEqual(1_000);
      expect(maxDepth).toBeLessThanOrEqual(3 * CAMPAIGN_PAGE);
      expect(upserts.length).toBeGreaterThanOrEqual(40);
      expect(upserts.every((s) => s === 200)).toBe(true);
    }, 400_000);
  });
}
