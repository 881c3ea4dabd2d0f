// The k6 load suite (npm run loadtest [-- --profile full|short] [--only name,...]).
// Each check runs k6 against a clean service it starts here (its own redis-server, limiterd
// and api as separate processes, all on 127.0.0.1); k6's thresholds fail a run (exit 99)
// when the service is wrong. Writes loadtest/results/loadtest-<time>.json and .txt.
//   full:  quotas (burst + 120 s at 1.5x) for each plan, IP limit, guards, lanes, SMTP
//   short: quotas (burst + 15 s) for each plan, IP limit, guards  (CI, under 5 minutes)
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { PLANS, planName, planQuota } from "../internal/plans/plans";
import { REPO_ROOT, type Stack, startRedis, startStack } from "../internal/testkit/testkit";
import { startCollector } from "./collector";
import { ensureK6, k6Version, spawnK6 } from "./k6tool";
import { smtpLoad } from "./smtp-load";

type Profile = "full" | "short";

interface RunResult {
  name: string;
  passed: boolean;
  exitCode: number;
  seconds: number;
  /** What the script's teardown reported (its console.log JSON lines). */
  details: unknown[];
  /** Thresholds and their verdicts from k6's summary. */
  thresholds: Record<string, boolean>;
  error?: string;
}

const log = (line: string) => console.log(`[loadtest ${new Date().toISOString().slice(11, 19)}] ${line}`);

function parseArgs(argv: string[]): { profile: Profile; only: Set<string> | undefined } {
  let profile: Profile = "full";
  let only: Set<string> | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--profile" && (argv[i + 1] === "full" || argv[i + 1] === "short")) profile = argv[++i] as Profile;
    else if (argv[i] === "--only" && argv[i + 1]) only = new Set(argv[++i]!.split(","));
    else
      throw new Error(
        "usage: bun run loadtest/run.ts [--profile full|short] [--only quotas-free,quotas-premium,quotas-enterprise,ip-limit,guards,lanes,smtp]",
      );
  }
  return { profile, only };
}

/** A clean service: its own Redis, limiterd and api; TRUST_PROXY so k6 can name client IPs. */
async function withService<T>(env: Record<string, string>, fn: (stack: Stack) => Promise<T>): Promise<T> {
  const redis = await startRedis();
  const stack = await startStack({ redisUrl: redis.url, env: { TRUST_PROXY: "127.0.0.1", ...env } });
  try {
    return await fn(stack);
  } finally {
    await stack.stop();
    await redis.stop();
  }
}

async function k6(
  k6Path: string,
  name: string,
  script: string,
  env: Record<string, string>,
  outDir: string,
): Promise<RunResult> {
  const started = Date.now();
  const collector = startCollector();
  const summary = join(outDir, `${name}.summary.json`);
  const proc = spawnK6(
    k6Path,
    script,
    { ...env, COLLECTOR: collector.url, PROTO_DIR: join(REPO_ROOT, "proto") },
    summary,
  );
  const [out, err, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  collector.stop();
  writeFileSync(join(outDir, `${name}.log`), `${out}\n${err}`);
  const details = [...`${out}\n${err}`.matchAll(/level=info msg="(\{.*?\})" source=console/g)].map((m) =>
    JSON.parse(m[1]!.replace(/\\"/g, '"')),
  );
  let thresholds: Record<string, boolean> = {};
  try {
    const s = JSON.parse(await Bun.file(summary).text()) as {
      metrics: Record<string, Record<string, unknown> & { thresholds?: Record<string, boolean> }>;
    };
    for (const [metric, m] of Object.entries(s.metrics)) {
      // In k6's summary export a threshold's value is true when it was crossed (failed).
      for (const [expr, crossed] of Object.entries(m.thresholds ?? {})) thresholds[`${metric}: ${expr}`] = !crossed;
      // The script's own measurements (trends such as the release delay) go into the report.
      if (/_ms$/.test(metric)) {
        const { thresholds: _, ...values } = m;
        details.push({ [metric]: values });
      }
    }
  } catch {
    thresholds = {};
  }
  return { name, passed: exitCode === 0, exitCode, seconds: (Date.now() - started) / 1000, details, thresholds };
}

async function main() {
  const { profile, only } = parseArgs(process.argv.slice(2));
  const k6Path = ensureK6(log);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const outDir = join(REPO_ROOT, "loadtest", "results", `loadtest-${stamp}`);
  mkdirSync(outDir, { recursive: true });
  const wanted = (name: string) => !only || only.has(name);
  const results: RunResult[] = [];
  const record = (r: RunResult) => {
    results.push(r);
    log(`${r.passed ? "PASS" : "FAIL"} ${r.name} (${r.seconds.toFixed(0)} s)${r.error ? `: ${r.error}` : ""}`);
    for (const d of r.details) log(`  ${JSON.stringify(d)}`);
    for (const [t, ok] of Object.entries(r.thresholds)) if (!ok) log(`  threshold crossed: ${t}`);
  };

  for (const plan of PLANS) {
    const name = `quotas-${planName(plan)}`;
    if (!wanted(name)) continue;
    log(`${name}: starting a clean service`);
    record(
      await withService({}, async (stack) => {
        const token = await stack.org(`k6-${planName(plan)}`, planName(plan));
        return k6(
          k6Path,
          name,
          "quotas.js",
          {
            API: stack.apiUrls[0]!,
            PLAN: planName(plan),
            QUOTA: String(planQuota(plan)),
            TOKEN: token,
            SUSTAINED_S: profile === "full" ? "120" : "15",
          },
          outDir,
        );
      }),
    );
  }
  if (wanted("ip-limit")) {
    record(
      await withService({}, async (stack) =>
        k6(k6Path, "ip-limit", "ip-limit.js", { API: stack.apiUrls[0]!, SECONDS: "3" }, outDir),
      ),
    );
  }
  if (wanted("guards")) {
    record(
      await withService({}, async (stack) => {
        const token = await stack.org("k6-guards", "enterprise");
        return k6(
          k6Path,
          "guards",
          "guards.js",
          { API: stack.apiUrls[0]!, TOKEN: token, DOMAIN: "k6-guards.example" },
          outDir,
        );
      }),
    );
  }
  if (profile === "full" && wanted("lanes")) {
    record(
      await withService({}, async (stack) => {
        const tokens = [];
        for (let i = 0; i < 3; i++)
          tokens.push({ token: await stack.org(`k6-lanes-${i}`, "enterprise"), domain: `k6-lanes-${i}.example` });
        return k6(
          k6Path,
          "lanes",
          "lanes.js",
          { API: stack.apiUrls[0]!, LIMITER: new URL(stack.limiterUrl).host, TOKENS: JSON.stringify(tokens) },
          outDir,
        );
      }),
    );
  }
  if (profile === "full" && wanted("smtp")) {
    const started = Date.now();
    try {
      const r = await smtpLoad(log);
      results.push({
        name: "smtp",
        passed: r.passed,
        exitCode: r.passed ? 0 : 99,
        seconds: (Date.now() - started) / 1000,
        details: [r],
        thresholds: r.thresholds,
      });
      log(`${r.passed ? "PASS" : "FAIL"} smtp: ${JSON.stringify(r)}`);
    } catch (err) {
      record({
        name: "smtp",
        passed: false,
        exitCode: 1,
        seconds: (Date.now() - started) / 1000,
        details: [],
        thresholds: {},
        error: (err as Error).message,
      });
    }
  }

  const report = {
    profile,
    k6: k6Version(),
    machine: { cores: cpus().length, cpu: cpus()[0]?.model },
    at: new Date().toISOString(),
    results,
  };
  writeFileSync(join(outDir, "loadtest.json"), `${JSON.stringify(report, null, 2)}\n`);
  const lines = [
    `k6 load suite (${profile}), ${report.k6}, ${report.machine.cores} cores`,
    ...results.map(
      (r) =>
        `${r.passed ? "PASS" : "FAIL"}  ${r.name.padEnd(18)} ${r.seconds.toFixed(0).padStart(4)} s  ${r.details.map((d) => JSON.stringify(d)).join(" ")}`,
    ),
  ];
  writeFileSync(join(outDir, "loadtest.txt"), `${lines.join("\n")}\n`);
  console.log(`\n${lines.join("\n")}\nresults: ${outDir}`);
  const failed = results.filter((r) => !r.passed).length;
  console.log(`loadtest: ${results.length - failed} passed, ${failed} failed`);
  process.exit(failed > 0 || results.length === 0 ? 1 : 0);
}

await main().catch((err) => {
  console.error(`loadtest: ${(err as Error).message}`);
  console.log("loadtest: 0 passed, 1 failed");
  process.exit(1);
});
