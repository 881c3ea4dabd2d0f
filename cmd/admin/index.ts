// admin: the operator's command line, talking to limiterd (and, for migrate, to the records).
// Each command loads only the modules it uses: a call costs little CPU, and scripts make many.
import { explain, runAdmin } from "../../internal/admin/cli";
import { databaseUrl, dirVar, limiterCredential, limiterUrl } from "../../internal/config/config";
import { ownerOnlyFiles } from "../../internal/datadir/datadir";
import type { UnarySession } from "../../internal/limiterclient/unary";

/** Prints a failure as every failure of the CLI is printed (JSON with --json) and exits with its code. */
function exit(err: unknown, limiterUrl: string): never {
  const { line, code } = explain(err, limiterUrl, process.argv.includes("--json"));
  console.error(line);
  process.exit(code);
}

function loadConfig() {
  try {
    return {
      limiterUrl: limiterUrl(process.env),
      limiterCredential: limiterCredential(process.env),
      databaseUrl: databaseUrl(process.env),
      dataDir: dirVar(process.env, "DATA_DIR", "data"),
    };
  } catch (err) {
    // A configuration error (exit 2) names the variables, not the daemon: no URL to give.
    exit(err, "");
  }
}
const cfg = loadConfig();
// migrate makes the records' file, certs init a set of keys: the user's alone.
ownerOnlyFiles();
let session: Promise<UnarySession> | undefined;
const deps = {
  rpc: () =>
    (session ??= import("../../internal/limiterclient/unary").then((m) =>
      m.unarySession(cfg.limiterUrl, cfg.limiterCredential),
    )),
  async migrate() {
    const { Db } = await import("../../internal/records/db");
    const { migrate } = await import("../../internal/records/migrations");
    const { sqliteRecordsFile } = await import("../../internal/records/records");
    const db = await Db.open({ url: cfg.databaseUrl, sqliteFile: sqliteRecordsFile(cfg.dataDir) });
    try {
      return await migrate(db);
    } finally {
      await db.close();
    }
  },
  readStdin: () => Bun.stdin.text(),
  readFile: (path: string) => Bun.file(path).text(),
  // Loaded for certs init only: the X.509 library is a large import for every other command.
  initCerts: async (dir: string, hosts: string[]) => (await import("../../internal/plane/certs")).initCerts(dir, hosts),
};
try {
  await runAdmin(process.argv.slice(2), deps, { out: (line) => console.log(line) });
  process.exit(0);
} catch (err) {
  exit(err, cfg.limiterUrl);
}
