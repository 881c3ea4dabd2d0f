// A private Postfix instance for tests: Debian's postfix, run as `postfix -c <dir>` from a
// directory of the test's own (main.cf, master.cf, the queue, the data directory, the log),
// listening on 127.0.0.1 and a free port (or the address and port a test gives: the MX port a
// worker delivers to). Every setting is in that main.cf, and every path
// Postfix writes to is under dir; of /etc/postfix it reads only the package's own files
// (meta_directory: postfix-files, dynamicmaps.cf), and the system's queue is never used.
//
// Run as root, Postfix insists on a few things: its daemons run as the postfix user, which must
// own the data directory and reach the queue (dir is made 0755); the postfix command reports
// errors to syslog or a terminal only, so maillog_file (written by postlogd, a service of
// master.cf) is where a failed start says why.
//
// Mail for LOCAL_DOMAIN goes to the local delivery agent, which knows no user there, so it
// bounces; mail for a domain of `routes` is relayed over SMTP to the host and port given (a
// receiver the test runs). Every temporary failure is returned at once (maximal_queue_lifetime
// = 0), so a test sees a 4xx's delivery status notification without waiting for retries.
import { spawn } from "bun";
import { chownSync, chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, tempDir, waitFor } from "./testkit";

export interface PostfixOptions {
  /** Domains relayed over SMTP (transport_maps), each to a receiver's host (an IP) and port. */
  routes: Record<string, { host: string; port: number }>;
  /** Where its SMTP server listens (a loopback address); 127.0.0.1 by default. */
  host?: string;
  /** Its SMTP server's port; a free one by default. */
  port?: number;
}

/** The domain Postfix delivers locally, where no user exists. */
export const LOCAL_DOMAIN = "postfix.test";

export interface Postfix {
  /** Where its SMTP server listens. */
  host: string;
  port: number;
  /** Its configuration directory (main.cf, master.cf, queue/, data/, maillog). */
  dir: string;
  /** The master process's pid. */
  pid: number;
  /** Whether the master process is still running. */
  running(): boolean;
  /** Its log so far (maillog_file). */
  log(): string;
  /** Stops it (`postfix -c dir stop`; the master is killed if it has not exited 10 s later) and removes its directory. */
  stop(): Promise<void>;
}

/** The postfix user that owns the queue and data directory (Debian's package creates it). */
const MAIL_OWNER = "postfix";

function idsOf(user: string): { uid: number; gid: number } {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${user}:`));
  if (!line) throw new Error(`no user ${user}: is Debian's postfix package installed?`);
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

/** main.cf of an instance kept inside dir. */
function mainCf(dir: string, o: PostfixOptions): string {
  const routes = Object.entries(o.routes).map(([domain, r]) => `${domain}=smtp:[${r.host}]:${r.port}`);
  const settings: Record<string, string> = {
    compatibility_level: "3.6",
    queue_directory: join(dir, "queue"),
    data_directory: join(dir, "data"),
    // Postfix logs to syslog unless told otherwise; its own file keeps the log with the test.
    maillog_file: join(dir, "maillog"),
    maillog_file_prefixes: dir,
    mail_owner: MAIL_OWNER,
    myhostname: `mta.${LOCAL_DOMAIN}`,
    mydomain: LOCAL_DOMAIN,
    myorigin: LOCAL_DOMAIN,
    mydestination: LOCAL_DOMAIN,
    inet_interfaces: "loopback-only",
    inet_protocols: "ipv4",
    mynetworks: "127.0.0.0/8",
    smtpd_relay_restrictions: "permit_mynetworks, reject_unauth_destination",
    // Accept every local recipient at RCPT, so an unknown user is bounced by the local delivery
    // agent afterwards (a DSN) rather than refused in the dialogue.
    local_recipient_maps: "",
    // No /etc/aliases: nothing outside dir is read for delivery.
    alias_maps: "",
    alias_database: "",
    biff: "no",
    transport_maps: `inline:{ ${routes.join(", ")} }`,
    // Every route is an IP literal; nothing is looked up in DNS.
    smtp_dns_support_level: "disabled",
    smtp_host_lookup: "native",
    // A 4xx is returned at once instead of after days of retries.
    maximal_queue_lifetime: "0",
    bounce_queue_lifetime: "0",
    smtp_tls_security_level: "none",
    smtpd_tls_security_level: "none",
  };
  return `${Object.entries(settings)
    .map(([k, v]) => `${k} = ${v}`)
    .join("\n")}\n`;
}

/** The services of master.cf a relay-and-bounce instance needs, none chrooted; smtpd on host:port. */
function masterCf(host: string, port: number): string {
  return `${[
    `${host}:${port} inet n - n - - smtpd`,
    "cleanup unix n - n - 0 cleanup",
    "qmgr unix n - n 300 1 qmgr",
    "rewrite unix - - n - - trivial-rewrite",
    "bounce unix - - n - 0 bounce",
    "defer unix - - n - 0 bounce",
    "trace unix - - n - 0 bounce",
    "verify unix - - n - 1 verify",
    "flush unix n - n 1000? 0 flush",
    "proxymap unix - - n - - proxymap",
    "smtp unix - - n - - smtp",
    "relay unix - - n - - smtp",
    "showq unix n - n - - showq",
    "error unix - - n - - error",
    "retry unix - - n - - error",
    "discard unix - - n - - discard",
    "local unix - n n - - local",
    "anvil unix - - n - 1 anvil",
    "scache unix - - n - 1 scache",
    "postlog unix-dgram n - n - 1 postlogd",
  ].join("\n")}\n`;
}

async function run(cmd: string[]): Promise<{ code: number; output: string }> {
  const p = spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, output: out + err };
}

/** The master's pid, from its pid file. */
function masterPid(dir: string): number | undefined {
  const file = join(dir, "queue", "pid", "master.pid");
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, "utf8").trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function startPostfix(opts: PostfixOptions): Promise<Postfix> {
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port ?? (await freePort());
  const dir = tempDir("mailcore-postfix-");
  // Postfix's daemons drop to the postfix user, which must reach the queue inside dir.
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, "queue"));
  mkdirSync(join(dir, "data"));
  const owner = idsOf(MAIL_OWNER);
  chownSync(join(dir, "data"), owner.uid, owner.gid);
  writeFileSync(join(dir, "main.cf"), mainCf(dir, opts));
  writeFileSync(join(dir, "master.cf"), masterCf(host, port));
  const log = () => (existsSync(join(dir, "maillog")) ? readFileSync(join(dir, "maillog"), "utf8") : "");

  // The master runs detached from the test (postfix start daemonizes it): should the test process
  // exit without stopping it, it is killed on the way out and its directory removed.
  let pid: number | undefined;
  const kill = () => {
    if (alive(pid)) process.kill(pid!, "SIGKILL");
  };
  const killOnExit = () => {
    kill();
    rmSync(dir, { recursive: true, force: true });
  };
  const stop = async () => {
    pid ??= masterPid(dir);
    await run(["postfix", "-c", dir, "stop"]);
    try {
      await waitFor("postfix's master to exit", async () => !alive(pid), 10_000);
    } catch {
      kill();
    }
    process.off("exit", killOnExit);
    rmSync(dir, { recursive: true, force: true });
  };

  process.on("exit", killOnExit);
  const started = await run(["postfix", "-c", dir, "start"]);
  try {
    if (started.code !== 0) throw new Error(`postfix -c ${dir} start failed (${started.code}): ${started.output}`);
    // Readiness, not speed: a loaded machine can take seconds to start the master's services.
    await waitFor(
      `postfix's smtpd on ${host}:${port}`,
      async () => {
        const socket = await Bun.connect({ hostname: host, port, socket: { data() {} } });
        socket.end();
        return true;
      },
      30_000,
    );
    pid = masterPid(dir);
    if (pid === undefined) throw new Error("postfix started without a master.pid");
  } catch (err) {
    const text = log();
    await stop();
    throw new Error(`${(err as Error).message}\n${text}`);
  }
  return { host, port, dir, pid, running: () => alive(pid), log, stop };
}
