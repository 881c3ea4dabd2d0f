// The idle daemon: limiterd with empty lanes (one API process and one worker beside it), on the
// embedded store and on Redis. After a settling period (30 s: sooner, the JIT is still compiling
// the start's code, a fifth of the window's CPU), limiterd's CPU (user + system, from /proc)
// and the commands Redis serves (INFO commandstats: every command, those run inside scripts and
// the INFO calls included) over a window; then one transactional send, and how long after its
// acceptance its lane released it and the worker wrote it to the file sink.
//
//   bun run loadtest/idle-bench.ts [--seconds N] [--settle N] [--only embedded|redis]   (30 and 30)
import { statSync } from "node:fs";
import { join } from "node:path";
import { Lane } from "../internal/gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../internal/limiterclient/client";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../internal/testkit/testkit";
import { cpuSeconds } from "../internal/testkit/machine";
import { cleanupAll, installSignalHandlers, onExit, round } from "./procs";

const arg = (name: string, fallback: string) =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1]! : fallback;
const seconds = Number(arg("--seconds", "30"));
const settle = Number(arg("--settle", "30"));
const only = arg("--only", "");

/** Commands Redis has served since it started, by command. */
async function redisCalls(port: number): Promise<Map<string, number>> {
  const p = Bun.spawn(["redis-cli", "-p", String(port), "info", "commandstats"], { stdout: "pipe" });
  const out = await new Response(p.stdout).text();
  return new Map([...out.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)].map((m) => [m[1]!, Number(m[2])]));
}

/** One send after the quiet: ms from its acceptance to its release and to the sink's file. */
async function firstAfterQuiet(stack: Stack, token: string) {
  const sent = await sendEmail(
    stack.apiUrls[0]!,
    token,
    { from: "App <app@quiet.example>", to: "first@example.org", subject: "After the quiet", text: "hello" },
    {},
    true,
  );
  if (sent.status !== 202) throw new Error(`the send answered ${sent.status}`);
  const id = sent.body.id as string;
  const file = join(stack.dataDir, "sink", `${id}.eml`);
  await waitFor("the delivery", async () => statSync(file, { throwIfNoEntry: false }) !== undefined, 10_000, 2);
  const res = await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, {
    headers: { Authorization: `Bearer ${token}`, "X-Forwarded-For": "10.99.0.9" },
  });
  const acceptedAt = Date.parse(((await res.json()) as { createdAt: string }).createdAt);
  const { releases } = await limiterClients(stack.limiterUrl, stack.credential).lanes.listReleases({
    lane: Lane.TRANSACTIONAL,
    sinceMs: BigInt(acceptedAt - 1_000),
  });
  const release = releases.find((r) => r.messageId === id);
  if (!release) throw new Error("the daemon lists no release of the message");
  return { releasedMs: Number(release.releasedAtMs) - acceptedAt, sinkMs: statSync(file).mtimeMs - acceptedAt };
}

installSignalHandlers();
const rows: Record<string, unknown>[] = [];
for (const deployment of ["embedded", "redis"] as const) {
  if (only && only !== deployment) continue;
  let redis: RedisServer | undefined;
  if (deployment === "redis") {
    redis = await startRedis();
    onExit("redis", () => redis!.stop());
  }
  const stack = await startStack({ redisUrl: redis?.url, workers: 1, env: { TRUST_PROXY: "127.0.0.1" } });
  onExit(`stack (${deployment})`, () => stack.stop());
  const token = await stack.org("quiet", "enterprise");
  await Bun.sleep(settle * 1_000);
  const pid = stack.limiterd.proc.pid;
  const cpu0 = cpuSeconds(pid)!;
  const calls0 = redis ? await redisCalls(redis.port) : new Map<string, number>();
  await Bun.sleep(seconds * 1_000);
  const cpu = cpuSeconds(pid)! - cpu0;
  const calls1 = redis ? await redisCalls(redis.port) : new Map<string, number>();
  const byCommand = Object.fromEntries(
    [...calls1]
      .map(([c, n]) => [c, round((n - (calls0.get(c) ?? 0) - (c === "info" ? 1 : 0)) / seconds, 2)] as const)
      .filter(([, n]) => n > 0),
  );
  const first = await firstAfterQuiet(stack, token);
  const row = {
    deployment,
    seconds,
    limiterdCpuPercent: round((cpu / seconds) * 100, 2),
    redisCommandsPerSecond: redis
      ? round(
          Object.values(byCommand).reduce((s, n) => s + n, 0),
          2,
        )
      : null,
    redisByCommand: redis ? byCommand : null,
    firstReleasedMs: first.releasedMs,
    firstInSinkMs: round(first.sinkMs, 1),
  };
  console.log(JSON.stringify(row));
  rows.push(row);
  await cleanupAll(); // this deployment's stack and Redis
}
console.log(JSON.stringify({ idle: rows }));
process.exit(0);
