// What the admin CLI costs a script: the CPU (user+system) of single `bun run cmd/admin` calls
// against a running limiterd, in cleartext and on mutual TLS, and the wall time and CPU of one
// `import` of many organizations (each with a verified domain and a token).
// Each daemon has the embedded hot store and SQLite records of its own.
// Usage: bun run loadtest/admin-cli.ts   env: CALLS (20), ORGS (10000; 0 skips the import)
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { initCerts } from "../internal/plane/certs";
import { clientTlsEnv, daemonTlsEnv, freePort, REPO_ROOT, runBun, tempDir, waitFor } from "../internal/testkit/testkit";
import { cpuSeconds } from "../internal/testkit/machine";
import { cleanupAll, installSignalHandlers, round, trackDir, trackProc } from "./procs";
import { table } from "./report";

const CALLS = Number(process.env.CALLS ?? 20);
const ORGS = Number(process.env.ORGS ?? 10_000);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  /** user+system CPU of the process, seconds. */
  cpu: number;
  wall: number;
}

/** One `bun run cmd/admin ...` to its end, with its own CPU from the kernel's accounting of the child. */
function admin(env: Record<string, string>, args: string[], input?: string): Run {
  const start = performance.now();
  const r = Bun.spawnSync([process.execPath, "run", "cmd/admin", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdin: input === undefined ? "ignore" : new Blob([input]),
    stdout: "pipe",
    stderr: "pipe",
  });
  const wall = (performance.now() - start) / 1000;
  const usage = r.resourceUsage;
  const cpu = usage ? (Number(usage.cpuTime.user) + Number(usage.cpuTime.system)) / 1e6 : Number.NaN;
  return { code: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString(), cpu, wall };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function startDaemon(tls: boolean, certs: string): Promise<{ env: Record<string, string>; pid: number }> {
  const port = await freePort();
  const url = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  const daemon = trackProc(
    `limiterd (${tls ? "mutual TLS" : "cleartext"})`,
    runBun("cmd/limiterd/index.ts", [], {
      DATA_DIR: trackDir(tempDir("mailcore-admin-cli-")),
      LIMITER_PORT: String(port),
      ...(tls ? daemonTlsEnv(certs) : {}),
    }),
  );
  const env = { LIMITER_URL: url, ...(tls ? clientTlsEnv(certs, "admin") : {}) };
  await waitFor(`limiterd at ${url}`, async () => admin(env, ["org", "create", "bench", "--plan", "free"]).code === 0);
  return { env, pid: daemon.proc.pid };
}

/** CALLS calls of each command; the median CPU and wall time of each. */
function perCall(mode: string, env: Record<string, string>): (string | number)[][] {
  const commands: [string, () => string[]][] = [
    ["org show", () => ["org", "show", "bench"]],
    ["token create --json", () => ["token", "create", "bench", "--json"]],
    ["org show (no such org)", () => ["org", "show", "nobody"]],
  ];
  return commands.map(([name, args]) => {
    const runs = Array.from({ length: CALLS }, () => admin(env, args()));
    const failed = runs.filter((r) => (r.code === 0) !== !name.includes("no such"));
    if (failed.length > 0) throw new Error(`${mode} ${name}: ${failed[0]!.stderr}`);
    const cpu = runs.map((r) => r.cpu * 1000);
    return [
      mode,
      name,
      round(median(cpu), 1),
      round(Math.min(...cpu), 1),
      round(Math.max(...cpu), 1),
      round(median(runs.map((r) => r.wall * 1000)), 1),
    ];
  });
}

installSignalHandlers();
try {
  const certs = trackDir(tempDir("mailcore-admin-cli-certs-"));
  await initCerts(certs, []);
  const cleartext = await startDaemon(false, certs);
  const mtls = await startDaemon(true, certs);
  // One call of Bun alone, for scale: what any `bun run` of a file costs before it loads anything.
  const empty = join(trackDir(tempDir("mailcore-admin-cli-empty-")), "empty.ts");
  writeFileSync(empty, "");
  const bare = Array.from({ length: CALLS }, () => Bun.spawnSync([process.execPath, "run", empty]).resourceUsage!);
  const bareMs = median(bare.map((u) => (Number(u.cpuTime.user) + Number(u.cpuTime.system)) / 1000));
  console.log(`bun run of an empty file: ${round(bareMs, 1)} ms CPU (median of ${CALLS})`);
  console.log(
    table(
      `admin CLI calls: CPU (user+system) and wall time per call, ${CALLS} calls each`,
      ["daemon", "command", "CPU ms (median)", "min", "max", "wall ms (median)"],
      [...perCall("cleartext", cleartext.env), ...perCall("mutual TLS", mtls.env)],
    ),
  );
  if (ORGS > 0) {
    const lines = Array.from({ length: ORGS }, (_, i) =>
      JSON.stringify({
        slug: `imp-${i}`,
        plan: "premium",
        domains: [{ name: `mail.imp-${i}.example`, verified: true }],
        token: true,
      }),
    ).join("\n");
    const rows = [];
    for (const pass of ["first (all created)", "again (all existing)"]) {
      const daemonCpu = cpuSeconds(cleartext.pid) ?? 0;
      const r = admin(cleartext.env, ["import", "-"], lines);
      if (r.code !== 0) throw new Error(`import: ${r.stderr}`);
      const results = r.stdout.trim().split("\n");
      if (results.length !== ORGS) throw new Error(`import printed ${results.length} lines for ${ORGS}`);
      rows.push([
        pass,
        ORGS,
        round(r.wall, 1),
        round(r.cpu, 2),
        round((cpuSeconds(cleartext.pid) ?? 0) - daemonCpu, 2),
      ]);
    }
    console.log(
      table(
        "import of organizations, each with a verified domain and a token",
        ["import", "organizations", "wall s", "CLI CPU s", "limiterd CPU s"],
        rows,
      ),
    );
  }
} finally {
  await cleanupAll();
}
