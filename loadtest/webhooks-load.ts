// Webhook deliveries per second with a fast receiver: a clean service (limiterd, api; then one
// worker), ENDPOINTS endpoints of one organization subscribed to email.queued, SENDS sends, so
// ENDPOINTS x SENDS deliveries wait in the queue before the worker starts; then the time to
// drain them, per second, checked: every delivery received once. Beside it, the bare ceiling:
// the same receiver driven by plain fetch at the same concurrency from one process; and the
// accept latency of another organization's transactional sends, idle and while the queue drains.
//   bun run loadtest/webhooks-load.ts            embedded store (SQLite records)
//   bun run loadtest/webhooks-load.ts --redis-pg Redis hot store, PostgreSQL records
import { startReceiver } from "../internal/testkit/receiver";
import { cpuSeconds } from "../internal/testkit/machine";
import { percentile } from "./report";
import { startPostgres } from "../internal/testkit/postgres";
import { getJson, pool, sendEmail, startRedis, startStack, waitFor } from "../internal/testkit/testkit";

const ENDPOINTS = 50;
const SENDS = 200;
const CONCURRENCY = 64;
const TOTAL = ENDPOINTS * SENDS;

const redisPg = process.argv.includes("--redis-pg");
const receiver = startReceiver();
const redis = redisPg ? await startRedis() : undefined;
const pg = redisPg ? await startPostgres() : undefined;
const stack = await startStack({
  workers: 0,
  redisUrl: redis?.url,
  env: {
    WEBHOOK_CONCURRENCY: String(CONCURRENCY),
    WEBHOOK_ALLOW_PRIVATE_URLS: "1",
    LOG_FORMAT: "json",
    ...(pg ? { DATABASE_URL: await pg.newDatabase() } : {}),
  },
});
try {
  const api = stack.apiUrls[0]!;
  const token = await stack.org("hooks", "enterprise");
  const ids: string[] = [];
  for (let i = 0; i < ENDPOINTS; i++) {
    const res = await fetch(`${api}/api/v1/webhooks`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ url: `${receiver.url}/e${i}`, events: ["email.queued"] }),
    });
    ids.push(((await res.json()) as { id: string }).id);
  }
  await pool(SENDS, 8, (i) =>
    sendEmail(api, token, {
      from: `L <l@hooks.example>`,
      to: `delivered+${i}@fixtures.test`,
      subject: `n${i}`,
      text: "x",
      lane: "bulk",
    }),
  );
  // Every send's email.queued written to the records (the history flush runs every 200 ms).
  const queued = async (id: string) => {
    let n = 0;
    let cursor = "";
    do {
      const page = await getJson(
        `${api}/api/v1/webhooks/${id}/deliveries?limit=100${cursor ? `&cursor=${cursor}` : ""}`,
        token,
      );
      n += (page.body.data as unknown[]).length;
      cursor = (page.body.nextCursor as string | null) ?? "";
    } while (cursor);
    return n;
  };
  await waitFor("every delivery queued", async () => (await queued(ids.at(-1)!)) === SENDS, 30_000);

  /** Accept latency of transactional sends of another organization (no webhooks), one every 50 ms, while `busy` says so (at most n). */
  const probe = await stack.org("probe", "enterprise");
  let sent = 0;
  const sendLatencies = async (n: number, busy: () => boolean) => {
    const out: number[] = [];
    while (out.length < n && busy()) {
      const t0 = performance.now();
      await sendEmail(api, probe, {
        from: `L <l@probe.example>`,
        to: `delivered+t${sent++}@fixtures.test`,
        subject: "t",
        text: "x",
      });
      out.push(performance.now() - t0);
      await Bun.sleep(50);
    }
    return out.sort((a, b) => a - b);
  };
  const idle = await sendLatencies(40, () => true);

  const started = performance.now();
  const daemonCpu0 = cpuSeconds(stack.limiterd.proc.pid) ?? 0;
  const worker = stack.startWorker();
  const draining = sendLatencies(200, () => receiver.received.length < TOTAL * 0.9);
  await waitFor(`${TOTAL} deliveries`, async () => receiver.received.length >= TOTAL, 300_000);
  const busy = await draining;
  const cpu = {
    limiterd: (cpuSeconds(stack.limiterd.proc.pid) ?? 0) - daemonCpu0,
    worker: cpuSeconds(worker.proc.pid) ?? 0,
  };
  const first = Math.min(...receiver.received.map((r) => r.atMs));
  const last = Math.max(...receiver.received.map((r) => r.atMs));
  const perSecond: number[] = [];
  for (const r of receiver.received)
    perSecond[Math.floor((r.atMs - first) / 1_000)] = (perSecond[Math.floor((r.atMs - first) / 1_000)] ?? 0) + 1;
  const distinct = new Set(receiver.received.map((r) => r.headers["webhook-id"])).size;
  const result = {
    store: redisPg ? "redis + postgresql" : "embedded (sqlite)",
    deliveries: TOTAL,
    received: receiver.received.length,
    duplicates: receiver.received.length - distinct,
    workerConcurrency: CONCURRENCY,
    secondsFromWorkerStart: Math.round((performance.now() - started) / 100) / 10,
    deliveriesPerSecond: Math.round(TOTAL / ((last - first) / 1_000)),
    cpuSeconds: { limiterd: Math.round(cpu.limiterd * 10) / 10, worker: Math.round(cpu.worker * 10) / 10 },
    perSecond,
    sendAcceptMs: {
      idle: { p50: Math.round(percentile(idle, 50) ?? 0), p99: Math.round(percentile(idle, 99) ?? 0), n: idle.length },
      whileDraining: {
        p50: Math.round(percentile(busy, 50) ?? 0),
        p99: Math.round(percentile(busy, 99) ?? 0),
        n: busy.length,
      },
    },
  };

  // The ceiling: the same receiver, plain fetch, the same concurrency, no service in between.
  receiver.received.length = 0;
  const body = JSON.stringify({
    type: "email.queued",
    timestamp: new Date().toISOString(),
    data: { emailId: "msg_x", to: "x@example.org" },
  });
  const t0 = performance.now();
  await pool(TOTAL, CONCURRENCY, () =>
    fetch(`${receiver.url}/ceiling`, { method: "POST", body, headers: { "Content-Type": "application/json" } }).then(
      (r) => r.arrayBuffer(),
    ),
  );
  const ceilingPerSecond = Math.round(TOTAL / ((performance.now() - t0) / 1_000));
  console.log(JSON.stringify({ ...result, ceilingPerSecond }, null, 2));
} finally {
  await stack.stop();
  await receiver.stop();
  await pg?.stop();
  await redis?.stop();
}
