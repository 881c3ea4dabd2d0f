// The test command (npm test): makes sure the tools the tests start are installed, runs
// `bun test`, and prints the closing line "tests: N passed, N failed" that CI reads.
import { spawnSync } from "bun";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./testkit";

// What the tests start or drive, how to tell it is there, and the Debian package that brings it.
const TOOLS: Record<string, { check: string; pkg: string }> = {
  "redis-server": { check: "command -v redis-server", pkg: "redis-server" },
  "redis-cli": { check: "command -v redis-cli", pkg: "redis-tools" },
  swaks: { check: "command -v swaks", pkg: "swaks" },
  "Net::SSLeay (swaks --tls)": { check: "perl -MNet::SSLeay -e1", pkg: "libnet-ssleay-perl" },
};
const has = (tool: string) => spawnSync(["sh", "-c", `${TOOLS[tool]!.check} >/dev/null 2>&1`]).exitCode === 0;

function ensureTools(): void {
  const missing = Object.keys(TOOLS).filter((t) => !has(t));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((t) => TOOLS[t]!.pkg))];
  const line = `apt-get install -y ${packages.join(" ")}`;
  const root = process.getuid?.() === 0;
  if (root && spawnSync(["sh", "-c", "command -v apt-get"]).exitCode === 0) {
    console.log(`installing ${packages.join(", ")} for the tests: ${line}`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    spawnSync(["apt-get", "update", "-qq"], { stdout: "inherit", stderr: "inherit", env });
    spawnSync(["apt-get", "install", "-y", "-qq", "--no-install-recommends", ...packages], { stdout: "inherit", stderr: "inherit", env });
  }
  const still = Object.keys(TOOLS).filter((t) => !has(t));
  if (still.length > 0) {
    console.error(`the tests need ${still.join(", ")}, which ${still.length === 1 ? "is" : "are"} not installed. Install with:\n  sudo ${line}`);
    console.log("tests: 0 passed, 1 failed");
    process.exit(1);
  }
}

ensureTools();
const outDir = join(REPO_ROOT, ".test-results");
rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });
const report = join(outDir, "junit.xml");
const run = spawnSync([process.execPath, "test", "--timeout", "120000", "--reporter=junit", `--reporter-outfile=${report}`, ...process.argv.slice(2)], {
  cwd: REPO_ROOT,
  stdout: "inherit",
  stderr: "inherit",
});

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
if (run.exitCode !== 0 && failed === 0) failed = 1;
if (passed === 0 && failed === 0) failed = 1;
writeFileSync(join(outDir, "summary.json"), JSON.stringify({ passed, failed }));
console.log(`tests: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 || run.exitCode !== 0 ? 1 : 0);
