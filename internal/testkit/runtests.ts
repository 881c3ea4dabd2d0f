// The test command (npm test): makes sure the tools the tests start are installed, runs every
// test file with `bun test` (several at a time), and prints the closing line
// "tests: N passed, N failed" that CI reads.
import { spawn, spawnSync } from "bun";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { machineTicks } from "./machine";
import { REPO_ROOT } from "./testkit";

// What the tests start or drive, how to tell it is there, the Debian package that brings it, and
// the answers its installation asks debconf for (preseeded, so apt-get asks nothing).
const TOOLS: Record<string, { check: string; pkg: string; debconf?: string[] }> = {
  "redis-server": { check: "command -v redis-server", pkg: "redis-server" },
  "redis-cli": { check: "command -v redis-cli", pkg: "redis-tools" },
  swaks: { check: "command -v swaks", pkg: "swaks" },
  "Net::SSLeay (swaks --tls)": { check: "perl -MNet::SSLeay -e1", pkg: "libnet-ssleay-perl" },
  "PostgreSQL (initdb, postgres)": {
    check: "command -v initdb || ls /usr/lib/postgresql/*/bin/initdb",
    pkg: "postgresql",
  },
  // The console's end-to-end tests drive Debian's Chromium through playwright-core.
  chromium: { check: "test -x /usr/bin/chromium", pkg: "chromium" },
  // The alert rules' tests run promtool (check rules, test rules); Debian ships it with Prometheus.
  promtool: { check: "command -v promtool", pkg: "prometheus" },
  // The DKIM signatures are verified by two implementations of others: dkimpy (Debian's python3,
  // with PyNaCl for Ed25519 and dnspython) and Perl's Mail::DKIM.
  "python3-dkim": { check: "/usr/bin/python3 -c 'import dkim, nacl, dns.resolver'", pkg: "python3-dkim" },
  "Mail::DKIM": { check: "perl -MMail::DKIM::Verifier -e1", pkg: "libmail-dkim-perl" },
  // The DNS tests serve their records from a dnsmasq of their own (testkit/dnsmasq.ts).
  dnsmasq: { check: "command -v dnsmasq || test -x /usr/sbin/dnsmasq", pkg: "dnsmasq-base" },
  // The DSN tests run a private Postfix (testkit/postfix.ts); installed without a configuration
  // of its own, it runs no system mail service.
  postfix: {
    check: "command -v postfix && test -x /usr/lib/postfix/sbin/master",
    pkg: "postfix",
    debconf: ["postfix postfix/main_mailer_type select No configuration"],
  },
  // The OpenAPI document's second engine (testkit/pyschema): Debian's Python with jsonschema, and
  // rfc3987, without which jsonschema leaves format uri unchecked.
  "python3-jsonschema": { check: "/usr/bin/python3 -c 'import jsonschema'", pkg: "python3-jsonschema" },
  "python3-rfc3987": { check: "/usr/bin/python3 -c 'import rfc3987'", pkg: "python3-rfc3987" },
};
const has = (tool: string) => spawnSync(["sh", "-c", `${TOOLS[tool]!.check} >/dev/null 2>&1`]).exitCode === 0;

function ensureTools(): void {
  const missing = Object.keys(TOOLS).filter((t) => !has(t));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((t) => TOOLS[t]!.pkg))];
  const line = `apt-get install -y ${packages.join(" ")}`;
  const answers = missing.flatMap((t) => TOOLS[t]!.debconf ?? []);
  const preseed = answers.map((a) => `echo "${a}" | sudo debconf-set-selections\n  `).join("");
  const root = process.getuid?.() === 0;
  if (root && spawnSync(["sh", "-c", "command -v apt-get"]).exitCode === 0) {
    console.log(`installing ${packages.join(", ")} for the tests: ${line}`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    if (answers.length > 0) {
      spawnSync(["debconf-set-selections"], { stdin: new Blob([`${answers.join("\n")}\n`]), env });
    }
    spawnSync(["apt-get", "update", "-qq"], { stdout: "inherit", stderr: "inherit", env });
    spawnSync(["apt-get", "install", "-y", "-qq", "--no-install-recommends", ...packages], {
      stdout: "inherit",
      stderr: "inherit",
      env,
    });
  }
  const still = Object.keys(TOOLS).filter((t) => !has(t));
  if (still.length > 0) {
    console.error(
      `the tests need ${still.join(", ")}, which ${still.length === 1 ? "is" : "are"} not installed. Install with:\n  ${preseed}sudo ${line}`,
    );
    console.log("tests: 0 passed, 1 failed");
    process.exit(1);
  }
}

/** Files that measure pacing or latency against real time, or load the whole machine for minutes, declare this on a line of their own and run alone. */
const ALONE = "// test-runner: alone";

interface FileResult {
  file: string;
  passed: number;
  failed: number;
  seconds: number;
}

/** Runs `bun test` on the given arguments with a JUnit report; counts from the report. */
async function runBunTest(
  args: string[],
  report: string,
  log: string,
): Promise<{ passed: number; failed: number; output: string }> {
  const proc = spawn(
    [process.execPath, "test", "--timeout", "120000", "--reporter=junit", `--reporter-outfile=${report}`, ...args],
    {
      cwd: REPO_ROOT,
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  const output = out + err;
  writeFileSync(log, output);
  let passed = 0;
  let failed = 1;
  if (existsSync(report)) {
    const head = /<testsuites[^>]*>/.exec(readFileSync(report, "utf8"))?.[0] ?? "";
    const attr = (name: string) => Number(new RegExp(`\\b${name}="(\\d+)"`).exec(head)?.[1] ?? "NaN");
    const [tests, failures, skipped] = [attr("tests"), attr("failures"), attr("skipped")];
    if ([tests, failures, skipped].every(Number.isFinite)) {
      failed = failures + skipped; // a skipped test is not a passed one
      passed = tests - failures - skipped;
    }
  }
  // A crash before any test ran, or a non-zero exit with every test passed, is a failure too.
  if (code !== 0 && failed === 0) failed = 1;
  if (passed === 0 && failed === 0) failed = 1;
  return { passed, failed, output };
}

ensureTools();
const outDir = join(REPO_ROOT, ".test-results");
rmSync(outDir, { recursive: true, force: true });
mkdirSync(join(outDir, "junit"), { recursive: true });
mkdirSync(join(outDir, "logs"), { recursive: true });

/**
 * Before a file that runs alone: waits (30 s at most) until the machine is quiet, under a quarter
 * of its CPU busy over a second, so what the shared files left behind (servers stopping, temp
 * directories being removed) does not fall into a pacing measurement.
 */
async function untilQuiet(): Promise<void> {
  const t0 = performance.now();
  let share = 1;
  while (performance.now() - t0 < 30_000) {
    const a = machineTicks();
    await Bun.sleep(1_000);
    const b = machineTicks();
    share = (b.busy - a.busy) / Math.max(1, b.total - a.total);
    if (share < 0.25) return;
  }
  console.log(
    `the machine stayed busy (${Math.round(share * 100)}% of its CPU) for 30 s; running the next file anyway`,
  );
}

const results: FileResult[] = [];
const started = performance.now();
const userArgs = process.argv.slice(2);
if (userArgs.length > 0) {
  // npm test -- <filters>: one bun test run, as asked.
  const r = await runBunTest(userArgs, join(outDir, "junit", "selected.xml"), join(outDir, "logs", "selected.log"));
  process.stdout.write(r.output);
  results.push({
    file: userArgs.join(" "),
    passed: r.passed,
    failed: r.failed,
    seconds: (performance.now() - started) / 1000,
  });
} else {
  // Every test file in its own bun test process, TEST_JOBS at a time (the process suites spend
  // most of their time waiting on real processes and real time); the files that measure pacing
  // run afterwards, one at a time, on an otherwise quiet machine.
  const files = [...new Bun.Glob("{internal,loadtest,cmd}/**/*.test.ts").scanSync({ cwd: REPO_ROOT })].sort();
  const alone = files.filter((f) => readFileSync(join(REPO_ROOT, f), "utf8").split("\n").includes(ALONE));
  // Longest first: the process suites, then by size.
  const shared = files
    .filter((f) => !alone.includes(f))
    .sort(
      (a, b) =>
        Number(b.includes("_process.")) - Number(a.includes("_process.")) ||
        statSync(join(REPO_ROOT, b)).size - statSync(join(REPO_ROOT, a)).size,
    );
  const jobs = Math.max(1, Number(process.env.TEST_JOBS ?? availableParallelism()));
  const runFile = async (file: string) => {
    const name = file.replaceAll("/", "_");
    const t0 = performance.now();
    const r = await runBunTest(
      [`./${file}`],
      join(outDir, "junit", `${name}.xml`),
      join(outDir, "logs", `${name}.log`),
    );
    const result = { file, passed: r.passed, failed: r.failed, seconds: (performance.now() - t0) / 1000 };
    results.push(result);
    process.stdout.write(
      `${r.output}\n=== ${file}: ${r.passed} passed, ${r.failed} failed in ${result.seconds.toFixed(1)} s\n\n`,
    );
  };
  console.log(`running ${shared.length} test files ${jobs} at a time, then ${alone.length} alone`);
  const queue = [...shared];
  await Promise.all(
    Array.from({ length: Math.min(jobs, queue.length) }, async () => {
      for (let file = queue.shift(); file; file = queue.shift()) await runFile(file);
    }),
  );
  for (const file of alone) {
    await untilQuiet();
    await runFile(file);
  }
}

const passed = results.reduce((n, r) => n + r.passed, 0);
const failed = results.reduce((n, r) => n + r.failed, 0);
writeFileSync(
  join(outDir, "summary.json"),
  JSON.stringify({ passed, failed, seconds: (performance.now() - started) / 1000, files: results }, null, 2),
);
const failing = results.filter((r) => r.failed > 0).map((r) => r.file);
if (failing.length > 0) console.log(`failed in: ${failing.join(", ")}`);
console.log(`tests: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
