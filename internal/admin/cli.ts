import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import type { Organization } from "../gen/mailcore/limiter/v1/limiter_pb";
import { parsePlan, planName } from "../plans/plans";
import { type Output, orgJson, UsageError } from "./output";

export const USAGE = `usage: bun run cmd/admin <command> [--json]
  org create <slug> --plan <free|premium|enterprise> [--domain <domain> [--verified]] [--token [--name <name>]]
  org set-plan <slug> <plan>
  org show <slug>
  token create <slug> [--name <name>]   prints the new token alone on stdout
  token revoke <token>
  domain add <slug> <domain> [--verified]
  user create <slug> <email>   adds a console user; reads the password from stdin
  import <file.jsonl|-> [--passwords <file|->]   creates organizations, domains, tokens and console
                               users from JSON lines, idempotent by slug; one JSON result a line
  lanes                        each lane's depth, release rate and oldest age
  migrate                      applies the records' pending migrations (limiterd does at start)
  certs init <dir> [--host <name>]...   writes a CA and the certificates of limiterd (for
                               localhost, 127.0.0.1 and each --host) and of the front, worker and
                               admin roles, for mutual TLS between the processes; needs no daemon
--json: one JSON object per result on stdout, errors as JSON on stderr (see docs/admin.md)
environment: LIMITER_URL (default http://127.0.0.1:7070; https:// with LIMITER_TLS_CA,
  LIMITER_TLS_CLIENT_CERT, LIMITER_TLS_CLIENT_KEY); migrate: DATABASE_URL or DATA_DIR`;

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
const VALUE_OPTIONS = new Set(["--plan", "--name", "--domain", "--passwords"]);
const SWITCHES = new Set(["--verified", "--token", "--json"]);

export interface AdminDeps {
  /** The connection to limiterd, made on first use: commands that need no daemon never load the gRPC client. */
  transport(): Promise<Transport>;
  /** Applies the records' pending migrations; returns the versions applied and the version now. */
  migrate(): Promise<{ applied: number[]; version: number }>;
  /** Standard input, all of it (a new console user's password). */
  readStdin(): Promise<string>;
  /** A file's text (an import, its passwords). */
  readFile(path: string): Promise<string>;
  /** Writes the internal plane's certificates into dir; returns the files written. */
  initCerts(dir: string, hosts: string[]): Promise<string[]>;
}

/** Runs one admin command against the daemon (or, for migrate, the records). Throws UsageError or ConnectError. */
export async function runAdmin(argv: string[], deps: AdminDeps, io: Output): Promise<void> {
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
  const json = flags.has("--json");
  /** One result: JSON with --json, the line for people otherwise. */
  const emit = (value: object, line: string) => io.out(json ? JSON.stringify(value) : line);
  // Each service's generated code is loaded only by the commands that call it.
  const directory = async () =>
    createClient((await import("../gen/mailcore/limiter/v1/limiter_pb")).DirectoryService, await deps.transport());
  const consoleClient = async () =>
    createClient((await import("../gen/mailcore/limiter/v1/console_pb")).ConsoleService, await deps.transport());

  if (args[0] === "migrate") {
    need(1);
    const { applied, version } = await deps.migrate();
    emit(
      { applied, version },
      applied.length === 0
        ? `records at version ${version}: nothing to apply`
        : `applied ${applied.join(", ")}: records at version ${version}`,
    );
    return;
  }

  if (args[0] === "lanes") {
    need(1);
    const { LaneService } = await import("../gen/mailcore/limiter/v1/mail_pb");
    const { laneName } = await import("../mail/policy");
    const { lanes } = await createClient(LaneService, await deps.transport()).getLanes({});
    if (!json) io.out("lane           depth   ready  in-flight  deferred  oldest-age  rate/s  released/s (last 10 s)");
    for (const l of lanes) {
      emit(
        {
          lane: laneName(l.lane),
          depth: Number(l.depth),
          ready: Number(l.ready),
          inFlight: Number(l.inFlight),
          deferred: Number(l.deferred),
          oldestAgeMs: Number(l.oldestAgeMs),
          rate: l.rate,
          releasedPerSecond: l.releasedPerSecond,
        },
        `${laneName(l.lane).padEnd(13)} ${String(l.depth).padStart(6)} ${String(l.ready).padStart(7)} ${String(l.inFlight).padStart(10)} ${String(l.deferred).padStart(9)} ${`${(Number(l.oldestAgeMs) / 1000).toFixed(1)}s`.padStart(11)} ${String(l.rate).padStart(7)} ${l.releasedPerSecond.toFixed(1).padStart(11)}`,
      );
    }
    return;
  }

  if (args[0] === "import") {
    need(2);
    const passwords = values.get("--passwords");
    if (args[1] === "-" && passwords === "-") throw new UsageError("the import and its passwords cannot both be stdin");
    const read = (path: string) => (path === "-" ? deps.readStdin() : deps.readFile(path));
    const { importOrganizations } = await import("./import");
    await importOrganizations(
      await read(args[1]!),
      passwords === undefined ? "" : await read(passwords),
      { directory: await directory(), console: await consoleClient() },
      io,
    );
    return;
  }

  switch (`${args[0]} ${args[1]}`) {
    case "certs init": {
      need(3);
      for (const file of await deps.initCerts(args[2]!, hosts)) emit({ wrote: file }, `wrote ${file}`);
      return;
    }
    case "org create": {
      need(3);
      const domain = values.get("--domain");
      if (flags.has("--verified") && domain === undefined) throw new UsageError("--verified goes with --domain");
      if (values.has("--name") && !flags.has("--token")) throw new UsageError("--name goes with --token");
      const res = await (await directory()).createOrganization({
        slug: args[2],
        plan: plan(planArg),
        domains: domain === undefined ? [] : [{ name: domain, verified: flags.has("--verified") }],
        withToken: flags.has("--token"),
        tokenName: values.get("--name") ?? "",
      });
      const created = orgJson(res.organization);
      if (!res.token) emit(created, `created ${describe(res.organization)}`);
      else
        emit(
          { ...created, token: res.token, tokenId: res.tokenId },
          `created ${describe(res.organization)}\n${res.token}`,
        );
      return;
    }
    case "org set-plan": {
      need(4);
      const res = await (await directory()).setPlan({ slug: args[2], plan: plan(args[3]) });
      emit(orgJson(res.organization), `updated ${describe(res.organization)}`);
      return;
    }
    case "org show": {
      need(3);
      const { organization } = await (await directory()).getOrganization({ slug: args[2] });
      emit(orgJson(organization), describe(organization));
      return;
    }
    case "token create": {
      need(3);
      const res = await (await directory()).createToken({ slug: args[2], name: values.get("--name") ?? "" });
      emit({ slug: args[2], token: res.token, tokenId: res.tokenId }, res.token);
      return;
    }
    case "token revoke": {
      need(3);
      await (await directory()).revokeToken({ token: args[2] });
      emit({ revoked: true }, "revoked");
      return;
    }
    case "domain add": {
      need(4);
      const res = await (await directory()).addDomain({
        slug: args[2],
        domain: args[3],
        verified: flags.has("--verified"),
      });
      emit(orgJson(res.organization), `updated ${describe(res.organization)}`);
      return;
    }
    case "user create": {
      need(4);
      // One line; its line end is not part of the password.
      const password = (await deps.readStdin()).replace(/\r?\n$/, "");
      if (password === "") throw new UsageError("give the new user's password on stdin");
      const res = await (await consoleClient()).createUser({ slug: args[2], email: args[3], password });
      emit(
        { slug: args[2], email: args[3], userId: res.userId },
        `created console user ${args[3]} (${res.userId}) in ${args[2]}`,
      );
      return;
    }
    default:
      throw new UsageError(args.length === 0 ? "no command given" : `unknown command: ${args.slice(0, 2).join(" ")}`);
  }
}

/**
 * The failed command's message for stderr, and its exit code (2 usage, 1 otherwise). With
 * json, the message is {"error":{"code","message"}}: code is "usage", or the gRPC status in
 * snake case ("already_exists", "not_found", "unavailable", ...).
 */
export function explain(err: unknown, limiterUrl: string, json = false): { line: string; code: number } {
  const [code, kind, message, text] = describeError(err, limiterUrl);
  return { line: json ? JSON.stringify({ error: { code: kind, message } }) : text, code };
}

function describeError(err: unknown, limiterUrl: string): [exit: number, kind: string, message: string, text: string] {
  if (err instanceof UsageError) return [2, "usage", err.message, `${err.message}\n${USAGE}`];
  if (err instanceof ConnectError) {
    const kind = Code[err.code].replace(/[a-z](?=[A-Z])/g, "$&_").toLowerCase();
    if (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded) {
      const message = `limiterd at ${limiterUrl} is unavailable: ${err.rawMessage}`;
      return [1, kind, message, message];
    }
    return [1, kind, err.rawMessage, `${Code[err.code]}: ${err.rawMessage}`];
  }
  return [1, "internal", String(err), String(err)];
}
