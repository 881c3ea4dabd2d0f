// Load generator for limiterd: calls LimiterService.AdmitBatch directly through the
// client the API uses, `INFLIGHT` calls at a time, each a batch of `BATCH` requests
// spread over the tokens of a file and many client IPs. A warm-up first, then the
// measured window, announced on stdout ("MEASURE_START"/"MEASURE_END") so the harness can
// read the other processes' CPU over exactly that window; the result is one line
// "BENCH_JSON {...}".
// Usage: bun run loadtest/admit-load.ts <limiter url> <tokens file>
//        env: WARMUP_MS, DURATION_MS, BATCH, INFLIGHT, IPS; for an https:// url, the front's
//        LIMITER_TLS_CA, LIMITER_TLS_CLIENT_CERT and LIMITER_TLS_CLIENT_KEY
import { readFileSync } from "node:fs";
import { limiterCredential, loadOrExit } from "../internal/config/config";
import { Verdict } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { type AdmitCall, limiterClients } from "../internal/limiterclient/client";
import { percentile } from "./report";

const [url, tokensFile] = process.argv.slice(2);
if (!url || !tokensFile) {
  console.error("usage: bun run loadtest/admit-load.ts <limiter url> <tokens file>");
  process.exit(2);
}
const num = (name: string, def: number) => Number(process.env[name] ?? def);
const WARMUP_MS = num("WARMUP_MS", 2_000);
const DURATION_MS = num("DURATION_MS", 10_000);
const BATCH = num("BATCH", 100);
const INFLIGHT = num("INFLIGHT", 8);
const IPS = num("IPS", 4096);

const tokens = readFileSync(tokensFile, "utf8").split("\n").filter(Boolean);
const ip = (n: number) => `198.${18 + (Math.floor(n / 65536) % 2)}.${Math.floor(n / 256) % 256}.${n % 256}`;

// A ring of ready-made batches, so the generator spends little on building them.
const RING = 64;
const batches: AdmitCall[][] = [];
for (let b = 0; b < RING; b++) {
  const calls: AdmitCall[] = [];
  for (let i = 0; i < BATCH; i++) {
    const n = b * BATCH + i;
    calls.push({ token: tokens[n % tokens.length]!, clientIp: ip((n * 7) % IPS), withTags: false });
  }
  batches.push(calls);
}

const { admitBatch } = limiterClients(
  url,
  loadOrExit("admit-load", () => limiterCredential({ ...process.env, LIMITER_URL: url })),
);

interface Stats {
  calls: number;
  admissions: number;
  errors: number;
  firstError?: string;
  verdicts: Record<string, number>;
  latenciesMs: number[];
}
const fresh = (): Stats => ({ calls: 0, admissions: 0, errors: 0, verdicts: {}, latenciesMs: [] });

let next = 0;
async function worker(until: number, s: Stats): Promise<void> {
  while (performance.now() < until) {
    const batch = batches[next++ % RING]!;
    const t0 = performance.now();
    try {
      const responses = await admitBatch(batch, 5_000);
      s.latenciesMs.push(performance.now() - t0);
      s.calls++;
      s.admissions += responses.length;
      for (const r of responses) {
        const v = Verdict[r.verdict] ?? String(r.verdict);
        s.verdicts[v] = (s.verdicts[v] ?? 0) + 1;
      }
    } catch (err) {
      s.errors++;
      s.firstError ??= (err as Error).message;
      await Bun.sleep(5);
    }
  }
}

async function phase(ms: number, s: Stats): Promise<number> {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: INFLIGHT }, () => worker(t0 + ms, s)));
  return (performance.now() - t0) / 1000;
}

const pct = (sorted: number[], p: number) => percentile(sorted, p) ?? 0;

await phase(WARMUP_MS, fresh());
const s = fresh();
// A call stuck past its own deadline would hold the window open: give up loudly instead.
setTimeout(() => {
  console.error(`admit-load: the measured window overran by 15 s (${s.calls} calls done, ${s.errors} errors)`);
  process.exit(3);
}, DURATION_MS + 15_000).unref();
console.log("MEASURE_START");
const cpu0 = process.cpuUsage();
const seconds = await phase(DURATION_MS, s);
const cpu = process.cpuUsage(cpu0);
console.log("MEASURE_END");
const lat = s.latenciesMs.sort((a, b) => a - b);
console.log(
  `BENCH_JSON ${JSON.stringify({
    seconds,
    batch: BATCH,
    inflight: INFLIGHT,
    tokens: tokens.length,
    ips: IPS,
    calls: s.calls,
    admissions: s.admissions,
    admissionsPerSecond: s.admissions / seconds,
    allowedPerSecond: (s.verdicts.ALLOWED ?? 0) / seconds,
    verdicts: s.verdicts,
    errors: s.errors,
    firstError: s.firstError,
    callLatencyMs: { p50: pct(lat, 50), p99: pct(lat, 99), max: lat[lat.length - 1] ?? 0 },
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  })}`,
);
process.exit(0);
