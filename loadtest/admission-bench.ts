// CPU per admission against the peer and the bare server (npm run bench -- --only admission):
// GET /api/v1/tags through the full path (api, limiterd, Redis), through the peer
// (peer-server.ts: Bun.serve and rate-limiter-flexible, on a Redis of its own) and a bare
// Bun.serve, and with --against DIR another checkout's full path; all up at once, measured wrk
// windows alternated in rounds (rounds.ts), each process's CPU per request the median of the
// rounds. The goals of the admission path are budgets of these: the full path at most the peer
// (its process and its Redis), the API at most 1.6 times the bare server, limiterd at most half
// of it, Redis at most the peer's Redis.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "bun";
import { freePort, REPO_ROOT, runBun, startRedis, waitFor } from "../internal/testkit/testkit";
import { onExit, trackProc } from "./procs";
import { enterpriseSenders, startFullPath } from "./fullpath";
import { redisPid } from "./redisbench";
import { alternatedRounds, type Target } from "./rounds";
import { runWrk } from "./wrk";

export interface AdmissionSettings {
  warmup: number;
  duration: number;
  rounds: number;
  connections: number;
  threads: number;
  ips: number;
  orgs: number;
  against?: string;
}

async function redisOf(label: string) {
  const redis = await startRedis();
  onExit(`redis-server (${label})`, () => redis.stop());
  return { ...redis, pid: await redisPid(redis.port) };
}

/** The full path of the checkout at root, with `orgs` enterprise organizations; their tokens and slugs. */
async function fullPath(name: string, root: string, orgs: number) {
  const redis = await redisOf(name);
  const { url, dataDir, clients, api, limiterd } = await startFullPath({ name, root, redisUrl: redis.url });
  const made = await enterpriseSenders(clients, "adm", orgs);
  const tokensFile = join(dataDir, "tokens.txt");
  writeFileSync(tokensFile, `${made.map((m) => m.token).join("\n")}\n`);
  const orgOf = join(dataDir, "peer-tokens.json");
  writeFileSync(orgOf, JSON.stringify(Object.fromEntries(made.map((m) => [m.token, m.slug]))));
  const target: Target = {
    name,
    url: `${url}/api/v1/tags`,
    tokensFile,
    pids: { api: api.proc.pid, limiterd: limiterd.proc.pid, "redis-server": redis.pid },
  };
  return { target, orgOf };
}

/** A server of loadtest/ on a free port (portVar), answering /healthz. */
async function loadtestServer(name: string, entry: string, portVar: string, env: Record<string, string>) {
  const port = await freePort();
  const p = trackProc(name, runBun(entry, [], { ...env, [portVar]: String(port) }));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(name, async () => (await fetch(`${url}/healthz`)).ok, 15_000).catch((err) => {
    throw new Error(`${(err as Error).message}\n${name} stderr:\n${p.stderr()}`);
  });
  return { url, pid: p.proc.pid };
}

const rev = (root: string) => spawnSync(["git", "-C", root, "rev-parse", "--short", "HEAD"]).stdout.toString().trim();

export async function admissionBench(s: AdmissionSettings, cores: number, log: (line: string) => void) {
  log("admission: the full path (redis-server, limiterd, api)");
  const ours = await fullPath(`full path ${rev(REPO_ROOT)}`, REPO_ROOT, s.orgs);
  const other = s.against ? await fullPath(`full path ${rev(s.against)} (other)`, s.against, s.orgs) : undefined;
  log("admission: the peer (on its own redis-server) and the bare Bun.serve");
  const peerRedis = await redisOf("peer");
  const peer = await loadtestServer("peer-server", "loadtest/peer-server.ts", "PEER_PORT", {
    REDIS_URL: peerRedis.url,
    PEER_TOKENS: ours.orgOf,
  });
  const bare = await loadtestServer("bare-server", "loadtest/bare-server.ts", "BARE_PORT", {});
  const targets: Target[] = [
    ours.target,
    {
      name: "peer",
      url: `${peer.url}/api/v1/tags`,
      tokensFile: ours.target.tokensFile,
      pids: { "peer-server": peer.pid, "redis-server": peerRedis.pid },
    },
    {
      name: "bare Bun.serve",
      url: `${bare.url}/api/v1/tags`,
      tokensFile: ours.target.tokensFile,
      pids: { "bare-server": bare.pid },
    },
    ...(other ? [other.target] : []),
  ];
  const wrk = { threads: s.threads, connections: s.connections, ips: s.ips };
  for (const t of targets) {
    log(`admission: ${t.name} — wrk ${s.warmup} s warm-up`);
    await runWrk({ ...wrk, url: t.url, tokensFile: t.tokensFile, seconds: s.warmup });
  }
  const closed = await alternatedRounds(targets, s.rounds, { ...wrk, seconds: s.duration }, cores, (l) =>
    log(`admission: ${l}`),
  );
  return {
    ours: ours.target.name,
    other: other?.target.name,
    closed,
    notOkShare: Math.max(...closed.windows.map((w) => w.run.notOk / Math.max(1, w.run.requests))),
  };
}
