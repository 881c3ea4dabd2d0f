// A PostgreSQL server of the test's own: initdb and postgres in a temporary directory, on a
// free port, as an unprivileged user when the tests run as root (PostgreSQL refuses root).
// Never the machine's own server.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, tempDir, waitFor } from "./testkit";

/** The directory of PostgreSQL's server binaries: initdb's on PATH (links followed), then Debian's /usr/lib/postgresql/<n>/bin. */
export function postgresBinDir(): string | undefined {
  const which = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim();
  if (which) return join(realpathSync(which), "..");
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(base, versions[0], "bin") : undefined;
}

/** The user the server runs as: ourselves, or (as root) postgres, else nobody. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    const uid = spawnSync("id", ["-u", name], { encoding: "utf8" });
    const gid = spawnSync("id", ["-g", name], { encoding: "utf8" });
    if (uid.status === 0 && gid.status === 0) return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
  }
  throw new Error("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as");
}

export interface PostgresServer {
  /** postgres://mailcore@127.0.0.1:<port>/<database> */
  url: string;
  port: number;
  /** A URL of another, empty database on the same server (created now). */
  newDatabase(): Promise<string>;
  /** Stops the server (fast shutdown); start() brings it back on the same port and data. */
  halt(): Promise<void>;
  /** kill -9 of the postmaster, as a crash; start() then runs PostgreSQL's crash recovery. */
  crash(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

let databases = 0;

/** With tls, the server takes TLS connections with this certificate and key (PEM) as well as cleartext ones. */
export async function startPostgres(opts: { tls?: { cert: string; key: string } } = {}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  if (!bin)
    throw new Error("PostgreSQL's server binaries (initdb, postgres) are not installed: apt-get install -y postgresql");
  const user = serverUser();
  const dir = tempDir("mailcore-pg-");
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, "data");
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(join(bin, cmd), args, { encoding: "utf8", ...user });
    if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr || r.stdout}`);
    return r.stdout;
  };
  run("initdb", ["-D", data, "-A", "trust", "-U", "mailcore", "--no-sync", "-E", "UTF8", "--locale=C"]);
  const port = await freePort();
  const tlsArgs: string[] = [];
  if (opts.tls) {
    // PostgreSQL reads a key only when its owner alone may read it.
    for (const [name, pem] of [
      ["server.crt", opts.tls.cert],
      ["server.key", opts.tls.key],
    ] as const) {
      writeFileSync(join(dir, name), pem, { mode: 0o600 });
      chmodSync(join(dir, name), 0o600);
      if (user) chownSync(join(dir, name), user.uid, user.gid);
    }
    tlsArgs.push("-c", "ssl=on", "-c", `ssl_cert_file=${join(dir, "server.crt")}`);
    tlsArgs.push("-c", `ssl_key_file=${join(dir, "server.key")}`);
  }
  let proc: ChildProcess | undefined;
  const psql = (sql: string) =>
    run("psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "mailcore", "-d", "postgres", "-tAc", sql]);
  const start = async () => {
    // After a crash the old backends hold the shared memory for a moment, and a new postmaster
    // refuses to start until they are gone: try again until one stays up.
    await waitFor(
      `postgres on ${port}`,
      async () => {
        if (!proc || proc.exitCode !== null || proc.signalCode !== null) {
          proc = spawn(
            join(bin, "postgres"),
            [
              "-D",
              data,
              "-p",
              String(port),
              "-k",
              dir,
              "-c",
              "listen_addresses=127.0.0.1",
              "-c",
              "fsync=off",
              "-c",
              "full_page_writes=off",
              "-c",
              "max_connections=200",
              ...tlsArgs,
            ],
            { stdio: "ignore", ...user },
          );
          await new Promise((done) => setTimeout(done, 200));
        }
        return spawnSync(join(bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(port)]).status === 0;
      },
      30_000,
    );
  };
  const signal = async (sig: NodeJS.Signals) => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((done) => p.once("exit", done));
    p.kill(sig);
    await exited;
  };
  const halt = () => signal("SIGINT");
  await start();
  psql("CREATE DATABASE mailcore");
  return {
    url: `postgres://mailcore@127.0.0.1:${port}/mailcore`,
    port,
    async newDatabase() {
      const name = `t${process.pid}_${++databases}`;
      psql(`CREATE DATABASE ${name}`);
      return `postgres://mailcore@127.0.0.1:${port}/${name}`;
    },
    halt,
    crash: () => signal("SIGKILL"),
    start,
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
