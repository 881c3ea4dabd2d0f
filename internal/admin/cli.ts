import { Code, ConnectError } from "@connectrpc/connect";
import type { Organization } from "../gen/mailcore/limiter/v1/limiter_pb";
import { laneName } from "../mail/policy";
import type { LimiterClients } from "../limiterclient/client";
import { parsePlan, planName } from "../plans/plans";

export const USAGE = `usage: bun run cmd/admin <command>
  org create <slug> --plan <free|premium|enterprise>
  org set-plan <slug> <plan>
  org show <slug>
  token create <slug> [--name <name>]   prints the new token alone on stdout
  token revoke <token>
  domain add <slug> <domain> [--verified]
  user create <slug> <email>   adds a console user; reads the password from stdin
  lanes                        each lane's depth, release rate and oldest age
  migrate                      applies the records' pending migrations (limiterd does at start)
  certs init <dir> [--host <name>]...   writes a CA and the certificates of limiterd (for
                               localhost, 127.0.0.1 and each --host) and of the front, worker and
                               admin roles, for mutual TLS between the processes; needs no daemon
environment: LIMITER_URL (default http://127.0.0.1:7070; https:// with LIMITER_TLS_CA,
  LIMITER_TLS_CLIENT_CERT, LIMITER_TLS_CLIENT_KEY); migrate: DATABASE_URL or DATA_DIR`;

export class UsageError extends Error {}

export interface Output {
  out(line: string): void;
}

function plan(name: string | undefined) {
  const p = name === undefined ? undefined : parsePlan(name);
  if (p === undefined)
    throw new UsageError(`plan must be free, premium or enterprise, not ${JSON.stringify(name ?? "")}`);
  return p;
}

function describe(org: Organization | undefined): string {
  if (!org) return "";
  const domains =
    org.domains.map((d) => `${d.name}${d.verified ? " (verified)" : " (unverified)"}`).join(", ") || "none";
  return `${org.slug} id=${org.id} plan=${planName(org.plan)} domains=${domains}`;
}

/** Options that take a value, and switches. */
const VALUE_OPTIONS = new Set(["--plan", "--name"]);
const SWITCHES = new Set(["--verified"]);

export interface AdminDeps {
  clients: LimiterClients;
  /** Applies the records' pending migrations; returns the versions applied and the version now. */
  migrate(): Promise<{ applied: number[]; version: number }>;
  /** Standard input, all of it (a new console user's password). */
  readStdin(): Promise<string>;
  /** Writes the internal plane's certificates into dir; returns the files written. */
  initCerts(dir: string, hosts: string[]): Promise<string[]>;
}

/** Runs one admin command against the daemon (or, for migrate, the records). Throws UsageError or ConnectError. */
export async function runAdmin(argv: string[], deps: AdminDeps, io: Output): Promise<void> {
  const { clients } = deps;
  const { directory } = clients;
  const values = new Map<string, string | undefined>();
  const flags = new Set<string>();
  const hosts: string[] = [];
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--host") {
      const host = argv[++i];
      if (host === undefined || host === "") throw new UsageError("--host takes a host name or IP address");
      hosts.push(host);
    } else if (VALUE_OPTIONS.has(a)) values.set(a, argv[++i]);
    else if (SWITCHES.has(a)) flags.add(a);
    else if (a.startsWith("--")) throw new UsageError(`unknown option ${a}`);
    else args.push(a);
  }
  if (hosts.length > 0 && args[0] !== "certs") throw new UsageError("--host goes with certs init only");
  const planArg = values.get("--plan");
  const need = (n: number) => {
    const words = Math.min(n, 2);
    if (args.length !== n) throw new UsageError(`${args.slice(0, words).join(" ")} takes ${n - words} argument(s)`);
  };

  if (args[0] === "migrate") {
    need(1);
    const { applied, version } = await deps.migrate();
    io.out(
      applied.length === 0
        ? `records at version ${version}: nothing to apply`
        : `applied ${applied.join(", ")}: records at version ${version}`,
    );
    return;
  }

  if (args[0] === "lanes") {
    need(1);
    const { lanes } = await clients.lanes.getLanes({});
    io.out("lane           depth   ready  in-flight  deferred  oldest-age  rate/s  released/s (last 10 s)");
    for (const l of lanes) {
      io.out(
        `${laneName(l.lane).padEnd(13)} ${String(l.depth).padStart(6)} ${String(l.ready).padStart(7)} ${String(l.inFlight).padStart(10)} ${String(l.deferred).padStart(9)} ${`${(Number(l.oldestAgeMs) / 1000).toFixed(1)}s`.padStart(11)} ${String(l.rate).padStart(7)} ${l.releasedPerSecond.toFixed(1).padStart(11)}`,
      );
    }
    return;
  }

  switch (`${args[0]} ${args[1]}`) {
    case "certs init": {
      need(3);
      for (const file of await deps.initCerts(args[2]!, hosts)) io.out(`wrote ${file}`);
      return;
    }
    case "org create": {
      need(3);
      const res = await directory.createOrganization({ slug: args[2], plan: plan(planArg) });
      io.out(`created ${describe(res.organization)}`);
      return;
    }
    case "org set-plan": {
      need(4);
      const res = await directory.setPlan({ slug: args[2], plan: plan(args[3]) });
      io.out(`updated ${describe(res.organization)}`);
      return;
    }
    case "org show": {
      need(3);
      io.out(describe((await directory.getOrganization({ slug: args[2] })).organization));
      return;
    }
    case "token create": {
      need(3);
      io.out((await directory.createToken({ slug: args[2], name: values.get("--name") ?? "" })).token);
      return;
    }
    case "token revoke": {
      need(3);
      await directory.revokeToken({ token: args[2] });
      io.out("revoked");
      return;
    }
    case "domain add": {
      need(4);
      const res = await directory.addDomain({ slug: args[2], domain: args[3], verified: flags.has("--verified") });
      io.out(`updated ${describe(res.organization)}`);
      return;
    }
    case "user create": {
      need(4);
      // One line; its line end is not part of the password.
      const password = (await deps.readStdin()).replace(/\r?\n$/, "");
      if (password === "") throw new UsageError("give the new user's password on stdin");
      const res = await clients.console.createUser({ slug: args[2], email: args[3], password });
      io.out(`created console user ${args[3]} (${res.userId}) in ${args[2]}`);
      return;
    }
    default:
      throw new UsageError(args.length === 0 ? "no command given" : `unknown command: ${args.slice(0, 2).join(" ")}`);
  }
}

/** One line for a failed command, and its exit code (2 usage, 1 otherwise). */
export function explain(err: unknown, limiterUrl: string): { line: string; code: number } {
  if (err instanceof UsageError) return { line: `${err.message}\n${USAGE}`, code: 2 };
  if (err instanceof ConnectError) {
    if (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded) {
      return { line: `limiterd at ${limiterUrl} is unavailable: ${err.rawMessage}`, code: 1 };
    }
    return { line: `${Code[err.code]}: ${err.rawMessage}`, code: 1 };
  }
  return { line: String(err), code: 1 };
}
