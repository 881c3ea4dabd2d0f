import type { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import type { DirectoryService, OrganizationJson } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { LaneService } from "../gen/mailcore/limiter/v1/mail_pb";
import type { DestinationService } from "../gen/mailcore/limiter/v1/destinations_pb";
import type { FeedbackService } from "../gen/mailcore/limiter/v1/feedback_pb";
import { ConfigError, configErrorLine } from "../config/config";
import { RpcError } from "../limiterclient/rpcerror";
import type { UnarySession } from "../limiterclient/unary";
import { parsePlanJson } from "../plans/json";
import { type Output, orgJson, UsageError } from "./output";

// The commands call the daemon in the Connect protocol's JSON form (limiterclient/unary.ts), with
// the generated code's types only: a call loads neither the Connect client nor protobuf-es.

export const USAGE = `usage: bun run cmd/admin <command> [--json]
  org create <slug> --plan <free|premium|enterprise> [--domain <domain> [--verified]] [--token [--name <name>]]
  org set-plan <slug> <plan>
  org show <slug>
  org resume-bulk <slug>       resumes bulk sends paused for the organization's complaint rate
  token create <slug> [--name <name>]   prints the new token alone on stdout
  token revoke <token>
  domain add <slug> <domain> [--verified]
  user create <slug> <email>   adds a console user; reads the password from stdin
  import <file.jsonl|-> [--passwords <file|->]   creates organizations, domains, tokens and console
                               users from JSON lines, idempotent by slug; one JSON result a line
  lanes                        each lane's depth, release rate and oldest age
  destinations                 MX delivery's destinations as each worker reported them: queue,
                               connections, slowed, suspended or failing since
  migrate                      applies the records' pending migrations (limiterd does at start)
  certs init <dir> [--host <name>]...   writes a CA and the certificates of limiterd (for
                               localhost, 127.0.0.1 and each --host) and of the front, worker and
                               admin roles, for mutual TLS between the processes; needs no daemon
--json: one JSON object per result on stdout, errors as JSON on stderr (see docs/admin.md)
environment: LIMITER_URL (default http://127.0.0.1:7070; https:// with LIMITER_TLS_CA,
  LIMITER_TLS_CLIENT_CERT, LIMITER_TLS_CLIENT_KEY); migrate: DATABASE_URL or DATA_DIR`;

function plan(name: string | undefined) {
  const p = name === undefined ? undefined : parsePlanJson(name);
  if (p === undefined)
    throw new UsageError(`plan must be free, premium or enterprise, not ${JSON.stringify(name ?? "")}`);
  return p;
}

/** What a destination is going through, in words: suspended, slowed down, failing, or ok. */
function destinationState(
  d: { slowedUntilMs: number; suspendedUntilMs: number; failingSinceMs: number },
  nowMs: number,
): string {
  const at = (ms: number) => new Date(ms).toISOString();
  const words: string[] = [];
  if (d.suspendedUntilMs > nowMs) words.push(`suspended until ${at(d.suspendedUntilMs)}`);
  if (d.slowedUntilMs > nowMs) words.push(`slowed until ${at(d.slowedUntilMs)}`);
  if (d.failingSinceMs > 0) words.push(`failing since ${at(d.failingSinceMs)}`);
  return words.join(", ") || "ok";
}

function describe(org: OrganizationJson | undefined): string {
  if (!org) return "";
  const { id, slug, plan, domains = [] } = orgJson(org);
  const names = domains.map((d) => `${d.name}${d.verified ? " (verified)" : " (unverified)"}`).join(", ") || "none";
  return `${slug} id=${id} plan=${plan} domains=${names}`;
}

/** Options that take a value, and switches. */
const VALUE_OPTIONS = new Set(["--plan", "--name", "--domain", "--passwords"]);
const SWITCHES = new Set(["--verified", "--token", "--json"]);

export interface AdminDeps {
  /** The connection to limiterd, made on first use: commands that need no daemon never load its client. */
  rpc(): Promise<UnarySession>;
  /** Applies the records' pending migrations; returns the versions applied and the version now. */
  migrate(): Promise<{ applied: number[]; version: number }>;
  /** Standard input, all of it (a new console user's password). */
  readStdin(): Promise<string>;
  /** A file's text (an import, its passwords). */
  readFile(path: string): Promise<string>;
  /** Writes the internal plane's certificates into dir; returns the files written. */
  initCerts(dir: string, hosts: string[]): Promise<string[]>;
}

/** Runs one admin command against the daemon (or, for migrate, the records). Throws UsageError or RpcError. */
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
  const directory = async () =>
    (await deps.rpc()).client<typeof DirectoryService>("mailcore.limiter.v1.DirectoryService");
  const consoleClient = async () =>
    (await deps.rpc()).client<typeof ConsoleService>("mailcore.limiter.v1.ConsoleService");

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
    const { lanes = [] } = await (await deps.rpc())
      .client<typeof LaneService>("mailcore.limiter.v1.LaneService")
      .getLanes({});
    if (!json) io.out("lane           depth   ready  in-flight  deferred  oldest-age  rate/s  released/s (last 10 s)");
    for (const l of lanes) {
      // The JSON form names a lane LANE_BULK, gives 64-bit counts as strings and leaves out zeros.
      const r = {
        lane: (l.lane ?? "LANE_UNSPECIFIED").replace(/^LANE_/, "").toLowerCase(),
        depth: Number(l.depth ?? 0),
        ready: Number(l.ready ?? 0),
        inFlight: Number(l.inFlight ?? 0),
        deferred: Number(l.deferred ?? 0),
        oldestAgeMs: Number(l.oldestAgeMs ?? 0),
        rate: Number(l.rate ?? 0),
        releasedPerSecond: Number(l.releasedPerSecond ?? 0),
      };
      emit(
        r,
        `${r.lane.padEnd(13)} ${String(r.depth).padStart(6)} ${String(r.ready).padStart(7)} ${String(r.inFlight).padStart(10)} ${String(r.deferred).padStart(9)} ${`${(r.oldestAgeMs / 1000).toFixed(1)}s`.padStart(11)} ${String(r.rate).padStart(7)} ${r.releasedPerSecond.toFixed(1).padStart(11)}`,
      );
    }
    return;
  }

  if (args[0] === "destinations") {
    need(1);
    const { workers = [] } = await (await deps.rpc())
      .client<typeof DestinationService>("mailcore.limiter.v1.DestinationService")
      .listDestinations({});
    if (!json)
      io.out("worker                 destination                               rule       queued  conns  state");
    const now = Date.now();
    for (const w of workers) {
      for (const d of w.destinations ?? []) {
        // The JSON form gives 64-bit times as strings and leaves out zeros.
        const r = {
          worker: w.workerId ?? "",
          reportedAtMs: Number(w.reportedAtMs ?? 0),
          destination: d.key ?? "",
          rule: d.rule ?? "",
          queued: d.queued ?? 0,
          connections: d.connections ?? 0,
          idle: d.idle ?? 0,
          slowedUntilMs: Number(d.slowedUntilMs ?? 0),
          suspendedUntilMs: Number(d.suspendedUntilMs ?? 0),
          failingSinceMs: Number(d.failingSinceMs ?? 0),
        };
        emit(
          r,
          `${r.worker.padEnd(22)} ${r.destination.padEnd(41)} ${r.rule.padEnd(10)} ${String(r.queued).padStart(6)} ${String(r.connections).padStart(6)}  ${destinationState(r, now)}`,
        );
      }
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
    case "org resume-bulk": {
      need(3);
      const res = await (await deps.rpc())
        .client<typeof FeedbackService>("mailcore.limiter.v1.FeedbackService")
        .resumeBulk({ slug: args[2] });
      const resumed = res.resumed === true;
      emit(
        { slug: args[2], resumed },
        resumed ? `resumed the bulk sends of ${args[2]}` : `the bulk sends of ${args[2]} were not paused`,
      );
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
      emit({ slug: args[2], token: res.token, tokenId: res.tokenId }, res.token ?? "");
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
 * The failed command's message for stderr, and its exit code (2 usage or configuration, 1
 * otherwise). With json, the message is {"error":{"code","message"}}: code is "usage",
 * "configuration", or the gRPC status in snake case ("already_exists", "not_found", ...).
 */
export function explain(err: unknown, limiterUrl: string, json = false): { line: string; code: number } {
  const [code, kind, message, text] = describeError(err, limiterUrl);
  return { line: json ? JSON.stringify({ error: { code: kind, message } }) : text, code };
}

function describeError(err: unknown, limiterUrl: string): [exit: number, kind: string, message: string, text: string] {
  if (err instanceof UsageError) return [2, "usage", err.message, `${err.message}\n${USAGE}`];
  if (err instanceof ConfigError) return [2, "configuration", err.message, configErrorLine("admin", err)];
  if (err instanceof RpcError) {
    if (err.code === "unavailable" || err.code === "deadline_exceeded") {
      const message = `limiterd at ${limiterUrl} is unavailable: ${err.message}`;
      return [1, err.code, message, message];
    }
    // For people, the code as gRPC's documentation spells it: not_found is NotFound.
    const name = err.code.replace(/(?:^|_)([a-z])/g, (_, c: string) => c.toUpperCase());
    return [1, err.code, err.message, `${name}: ${err.message}`];
  }
  return [1, "internal", String(err), String(err)];
}
