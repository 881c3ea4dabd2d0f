// Accepted sends against the send peer (npm run bench -- --only sends): POST /api/v1/emails
// through the accept path (api, limiterd on Redis with appendfsync always, the records in
// SQLite) and through send-peer.ts (what a user would write in one process, on a Redis of its
// own, also appendfsync always), and with --against DIR another checkout's accept path.
//   1. Throughput and CPU: wrk with send.lua (32 connections: 32 clients, each waiting for its
//      answer), measured windows alternated in rounds; CPU per accepted send of each process.
//   2. Latency at the same offered rate: k6 (sends.js, constant arrival rate) at half the slowest
//      target's median rate, alternated; p50 and p99 of each.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "bun";
import { freePort, REPO_ROOT, runBun, startRedis, tempDir, waitFor } from "../internal/testkit/testkit";
import { type LatencyResult, runLatency } from "./latency";
import { onExit, trackProc } from "./procs";
import { enterpriseSenders, startFullPath } from "./fullpath";
import { redisPid } from "./redisbench";
import { alternatedRounds, median, type Target } from "./rounds";
import { runWrk } from "./wrk";

export interface SendsSettings {
  warmup: number;
  duration: number;
  rounds: number;
  clients: number;
  orgs: number;
  latencySeconds: number;
  /** Another checkout whose accept path is measured too. */
  against?: string;
}

const IPS = 4096;

/** A redis-server with appendfsync always, its pid; stopped on exit. */
async function aofRedis(label: string) {
  const redis = await startRedis({ aof: true });
  onExit(`redis-server (${label})`, () => redis.stop());
  return { ...redis, pid: await redisPid(redis.port) };
}

/** The accept path of the checkout at root: redis-server, limiterd (records in SQLite) and the API, with `orgs` senders. */
async function acceptPath(name: string, root: string, orgs: number): Promise<Target> {
  const redis = await aofRedis(name);
  const { url, dataDir, api, limiterd, clients } = await startFullPath({ name, root, redisUrl: redis.url });
  const lines = (await enterpriseSenders(clients, "send", orgs)).map((o) => `${o.token} ${o.domain}`);
  const tokensFile = join(dataDir, "senders.txt");
  writeFileSync(tokensFile, `${lines.join("\n")}\n`);
  return {
    name,
    url: `${url}/api/v1/emails`,
    tokensFile,
    pids: { api: api.proc.pid, limiterd: limiterd.proc.pid, "redis-server": redis.pid },
  };
}

/** send-peer.ts on a Redis of its own, for the senders of tokensFile. */
async function sendPeer(tokensFile: string): Promise<Target> {
  const redis = await aofRedis("send peer");
  const port = await freePort();
  const peer = trackProc(
    "send-peer",
    runBun("loadtest/send-peer.ts", [], {
      SEND_PEER_PORT: String(port),
      REDIS_URL: redis.url,
      SEND_PEER_TOKENS: tokensFile,
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  await waitFor("send-peer", async () => (await fetch(`${url}/healthz`)).ok, 15_000).catch((err) => {
    throw new Error(`${(err as Error).message}\nsend-peer stderr:\n${peer.stderr()}`);
  });
  return {
    name: "send peer",
    url: `${url}/api/v1/emails`,
    tokensFile,
    pids: { "send-peer": peer.proc.pid, "redis-server": redis.pid },
  };
}

const rev = (root: string) => spawnSync(["git", "-C", root, "rev-parse", "--short", "HEAD"]).stdout.toString().trim();

export async function sendsBench(s: SendsSettings, cores: number, k6: string, log: (line: string) => void) {
  log("sends: the accept path (redis-server with appendfsync always, limiterd with SQLite records, api)");
  const ours = await acceptPath(`accept path ${rev(REPO_ROOT)}`, REPO_ROOT, s.orgs);
  const other = s.against ? await acceptPath(`accept path ${rev(s.against)} (other)`, s.against, s.orgs) : undefined;
  log("sends: the send peer (Bun.serve, rate-limiter-flexible, guards and XADD on its own redis-server)");
  const peer = await sendPeer(ours.tokensFile);
  const targets = [ours, peer, ...(other ? [other] : [])];
  const wrk = { threads: 2, connections: s.clients, ips: IPS, script: "send" as const };
  for (const t of targets) {
    log(`sends: ${t.name} — wrk ${s.warmup} s warm-up`);
    await runWrk({ ...wrk, url: t.url, tokensFile: t.tokensFile, seconds: s.warmup });
  }
  const closed = await alternatedRounds(targets, s.rounds, { ...wrk, seconds: s.duration }, cores, (l) =>
    log(`sends: ${l}`),
  );
  const rate = Math.max(1, Math.round(0.5 * Math.min(...targets.map((t) => closed.medians[t.name]!.okPerSecond))));
  const latency: { target: string; round: number; result: LatencyResult }[] = [];
  for (let round = 0; round < 2; round++) {
    for (const t of round % 2 ? [...targets].reverse() : targets) {
      log(`sends: latency, ${t.name} — k6 at ${rate}/s for ${s.latencySeconds} s`);
      const result = await runLatency(
        {
          url: t.url.replace(/\/api\/v1\/emails$/, ""),
          rate,
          seconds: s.latencySeconds,
          tokensFile: t.tokensFile,
          ips: IPS,
          script: "sends.js",
          summary: join(tempDir("mailcore-bench-k6-"), "summary.json"),
          pids: t.pids,
          cores,
        },
        k6,
      );
      latency.push({ target: t.name, round, result });
    }
  }
  const latencyMedians = Object.fromEntries(
    targets.map((t) => {
      const of = latency.filter((l) => l.target === t.name).map((l) => l.result);
      return [
        t.name,
        {
          p50Ms: median(of.map((r) => r.latencyMs.p50)),
          p99Ms: median(of.map((r) => r.latencyMs.p99)),
          achievedPerSecond: median(of.map((r) => r.achievedPerSecond)),
          notOkShare: Math.max(...of.map((r) => r.notOkShare)),
        },
      ];
    }),
  );
  return {
    ours: ours.name,
    peer: peer.name,
    other: other?.name,
    closed,
    rate,
    latency,
    latencyMedians,
    notOkShare: Math.max(...closed.windows.map((w) => w.run.notOk / Math.max(1, w.run.requests))),
  };
}
