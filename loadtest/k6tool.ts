// k6, built from the Go module proxy with this machine's Go into loadtest/.tools (ignored by
// git) and reused while present. k6 runs offline: no extension resolution, no usage report.
import { spawn, spawnSync } from "bun";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../internal/testkit/testkit";

export const K6_MODULE = "go.k6.io/k6@v1.8.1";
export const TOOLS_DIR = join(REPO_ROOT, "loadtest", ".tools");
export const K6 = join(TOOLS_DIR, "k6");

export const K6_ENV = { K6_AUTO_EXTENSION_RESOLUTION: "false", K6_NO_USAGE_REPORT: "true", K6_NO_COLOR: "true" };

function goBinary(): string | undefined {
  for (const candidate of ["go", "/usr/local/go/bin/go"]) {
    if (spawnSync(["sh", "-c", `command -v ${candidate}`]).exitCode === 0) return candidate;
  }
  return undefined;
}

export function k6Version(): string | undefined {
  if (!existsSync(K6)) return undefined;
  const out = spawnSync([K6, "version"], { env: { ...process.env, ...K6_ENV } });
  return out.exitCode === 0 ? out.stdout.toString().trim() : undefined;
}

/** The k6 binary, built first when missing. Throws with the build's own error when it cannot be built. */
export function ensureK6(log: (line: string) => void): string {
  const have = k6Version();
  if (have?.includes(K6_MODULE.split("@")[1]!)) return K6;
  const go = goBinary();
  if (!go)
    throw new Error(
      `k6 is not built and there is no Go to build it: install Go, then: GOBIN=${TOOLS_DIR} go install ${K6_MODULE}`,
    );
  log(`building k6 (${K6_MODULE}) into ${TOOLS_DIR}; the first build takes a few minutes`);
  const started = Date.now();
  const build = spawnSync([go, "install", K6_MODULE], {
    env: { ...process.env, GOBIN: TOOLS_DIR, GOFLAGS: "-mod=mod" },
    stdout: "pipe",
    stderr: "pipe",
  });
  if (build.exitCode !== 0 || !k6Version()) {
    throw new Error(
      `could not build k6 with: GOBIN=${TOOLS_DIR} ${go} install ${K6_MODULE}\n${build.stderr.toString().trim()}`,
    );
  }
  log(`built ${k6Version()} in ${Math.round((Date.now() - started) / 1000)} s`);
  return K6;
}

/**
 * Starts `k6 run` of a script in loadtest/k6, offline (K6_ENV, --no-usage-report), with -e
 * variables, its end-of-test summary exported as JSON to `summary`.
 */
export function spawnK6(
  k6: string,
  script: string,
  vars: Record<string, string>,
  summary: string,
  flags: string[] = [],
) {
  const args = [k6, "run", "--no-usage-report", "--summary-export", summary, ...flags];
  for (const [k, v] of Object.entries(vars)) args.push("-e", `${k}=${v}`);
  args.push(join(REPO_ROOT, "loadtest", "k6", script));
  return spawn(args, { env: { ...process.env, ...K6_ENV }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
}
