// Helpers for tests that start real things: a redis-server of their own on a free port,
// and the project's processes as separate `bun run cmd/...` processes.
import { type Subprocess, spawn } from "bun";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { withAllocatorEnv } from "../config/allocator";
import { limiterCredential } from "../config/config";
import type { ClientCredential } from "../plane/secret";
import type { Role } from "../plane/tls";

export const REPO_ROOT = resolve(import.meta.dir, "../..");

/** A port the kernel says is free right now. */
export async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => done(port));
    });
  });
}

export function tempDir(prefix = "mailcore-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
  intervalMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await Bun.sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export interface RedisServer {
  url: string;
  port: number;
  /** Kills the server with SIGKILL and starts it again on the same port and directory. */
  restart(): Promise<void>;
  /** Stops the process (SIGSTOP) as a partition would: it neither reads nor answers until resume. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/**
 * Starts a redis-server of the test's own on a free port; with aof, every write is fsynced to an
 * append-only file; with tls (PEM), it takes TLS connections only (rediss://), without client
 * certificates.
 */
export async function startRedis(
  opts: { aof?: boolean; tls?: { cert: string; key: string; ca: string }; replicaOf?: RedisServer } = {},
): Promise<RedisServer> {
  const port = await freePort();
  const dir = tempDir("mailcore-redis-");
  const persistence = opts.aof ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"];
  if (opts.replicaOf) persistence.push("--replicaof", "127.0.0.1", String(opts.replicaOf.port));
  let listen = ["--port", String(port)];
  let cliTls: string[] = [];
  if (opts.tls) {
    for (const [name, pem] of Object.entries(opts.tls)) writeFileSync(join(dir, `${name}.pem`), pem, { mode: 0o600 });
    listen = ["--port", "0", "--tls-port", String(port), "--tls-auth-clients", "no"];
    listen.push("--tls-cert-file", join(dir, "cert.pem"), "--tls-key-file", join(dir, "key.pem"));
    listen.push("--tls-ca-cert-file", join(dir, "ca.pem"));
    cliTls = ["--tls", "--cacert", join(dir, "ca.pem")];
  }
  const start = async () => {
    const p = spawn(["redis-server", ...listen, "--bind", "127.0.0.1", "--save", "", ...persistence, "--dir", dir], {
      stdout: "ignore",
      stderr: "ignore",
    });
    try {
      await waitFor(`redis-server on ${port}`, async () => {
        const res = spawn(["redis-cli", ...cliTls, "-p", String(port), "ping"], { stdout: "pipe", stderr: "ignore" });
        return (await new Response(res.stdout).text()).trim() === "PONG";
      });
    } catch (err) {
      p.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    return p;
  };
  let proc = await start();
  return {
    url: `${opts.tls ? "rediss" : "redis"}://127.0.0.1:${port}`,
    port,
    async restart() {
      proc.kill("SIGKILL");
      await proc.exited;
      proc = await start();
    },
    pause: () => proc.kill("SIGSTOP"),
    resume: () => proc.kill("SIGCONT"),
    async stop() {
      proc.kill("SIGCONT");
      proc.kill("SIGKILL");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A redis-sentinel of the test's own, watching one primary under a name. */
export interface RedisSentinelServer {
  port: number;
  /** The port of the primary the sentinel names now. */
  primaryPort(): Promise<number>;
  /** Runs redis-cli against the sentinel; its output. */
  cli(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts one sentinel (quorum 1: it alone decides a failover) watching the primary as `name`.
 * The tests ask for their failovers (SENTINEL FAILOVER); down only after 10 s without an answer,
 * a node that a loaded machine starves for a second is neither failed over by itself nor, as a
 * replica, passed over for promotion.
 */
export async function startSentinel(primary: RedisServer, name: string): Promise<RedisSentinelServer> {
  const port = await freePort();
  const dir = tempDir("mailcore-sentinel-");
  const conf = join(dir, "sentinel.conf");
  writeFileSync(
    conf,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${primary.port} 1`,
      `sentinel down-after-milliseconds ${name} 10000`,
      `sentinel failover-timeout ${name} 10000`,
    ].join("\n"),
  );
  const proc = spawn(["redis-server", conf, "--sentinel"], { stdout: "ignore", stderr: "ignore" });
  const cli = async (...args: string[]) => {
    const res = spawn(["redis-cli", "-p", String(port), ...args], { stdout: "pipe", stderr: "ignore" });
    return (await new Response(res.stdout).text()).trim();
  };
  const primaryPort = async () => Number((await cli("sentinel", "get-master-addr-by-name", name)).split("\n")[1]);
  try {
    await waitFor(`redis-sentinel on ${port}`, async () => (await primaryPort()) === primary.port);
  } catch (err) {
    proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    primaryPort,
    cli,
    async stop() {
      proc.kill("SIGKILL");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts a redis-server and a replica of it; resolves once the replica has synced and its primary counts it online. */
export async function startRedisWithReplica(opts: { aof?: boolean } = {}) {
  const primary = await startRedis(opts);
  const replica = await startRedis({ ...opts, replicaOf: primary });
  const replication = async (port: number) => {
    const res = spawn(["redis-cli", "-p", String(port), "info", "replication"], { stdout: "pipe" });
    return await new Response(res.stdout).text();
  };
  await waitFor("the replica's sync", async () => {
    return (
      (await replication(replica.port)).includes("master_link_status:up") &&
      /^slave0:.*state=online/m.test(await replication(primary.port))
    );
  });
  return { primary, replica, stop: () => Promise.all([replica.stop(), primary.stop()]).then(() => {}) };
}

export interface Proc {
  proc: Subprocess<"ignore" | Blob, "pipe", "pipe">;
  /** What the process wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves when both streams are drained (after exit). */
  drained: Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<number>;
}

/** Runs `bun run <entry> ...args` from the repo root as its own process; input, when given, is its standard input. */
export function runBun(entry: string, args: string[], env: Record<string, string>, input?: string): Proc {
  const proc = spawn([process.execPath, "run", entry, ...args], {
    cwd: REPO_ROOT,
    // The allocator settings the service's processes run with (npm start sets them too).
    env: withAllocatorEnv({ ...process.env, ...env }),
    stdin: input === undefined ? "ignore" : new Blob([input]),
    stdout: "pipe",
    stderr: "pipe",
  });
  const text = { out: "", err: "" };
  const drain = async (stream: ReadableStream<Uint8Array>, into: "out" | "err") => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) text[into] += decoder.decode(chunk, { stream: true });
  };
  const drained = Promise.all([drain(proc.stdout, "out"), drain(proc.stderr, "err")]).then(() => {});
  return {
    proc,
    stdout: () => text.out,
    stderr: () => text.err,
    drained,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return proc.exited;
    },
  };
}

/** Runs a command to completion. */
export async function runToEnd(entry: string, args: string[], env: Record<string, string>, input?: string) {
  const p = runBun(entry, args, env, input);
  const code = await p.proc.exited;
  await p.drained;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

export interface Stack {
  limiterUrl: string;
  /** The admin's certificate on a stack with certs; else the plane secret in dataDir, which limiterd makes. */
  credential: ClientCredential;
  apiUrls: string[];
  dataDir: string;
  /** The environment every process of the stack was started with. */
  env: Record<string, string>;
  limiterd: Proc;
  apis: Proc[];
  workers: Proc[];
  /** Starts one more worker process. */
  startWorker(env?: Record<string, string>): Proc;
  /** Kills the daemon with SIGKILL and starts it again on the same port and data. */
  restartLimiterd(): Promise<void>;
  /** Runs the admin CLI against this stack's daemon. */
  admin(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Creates an organization with the verified domain <slug>.example and a token; returns the token. */
  org(slug: string, plan: string): Promise<string>;
  stop(): Promise<void>;
}

export interface StackOptions {
  redisUrl?: string;
  /** A Redis Cluster for the hot store (REDIS_CLUSTER_NODES). */
  redisClusterNodes?: string[];
  apis?: number;
  workers?: number;
  env?: Record<string, string>;
  /** A directory written by initCerts: the daemon on mutual TLS, each process with its role's certificate. */
  certs?: string;
}

/** limiterd's variables for mutual TLS with the certificates of an initCerts directory. */
export function daemonTlsEnv(certs: string): Record<string, string> {
  return {
    LIMITER_TLS_CERT: join(certs, "daemon.pem"),
    LIMITER_TLS_KEY: join(certs, "daemon.key"),
    LIMITER_TLS_CLIENT_CA: join(certs, "ca.pem"),
  };
}

/** The variables of a client of limiterd that holds the certificate of `role` from an initCerts directory. */
export function clientTlsEnv(certs: string, role: Role): Record<string, string> {
  return {
    LIMITER_TLS_CA: join(certs, "ca.pem"),
    LIMITER_TLS_CLIENT_CERT: join(certs, `${role}.pem`),
    LIMITER_TLS_CLIENT_KEY: join(certs, `${role}.key`),
  };
}

// A process starting on a loaded machine (CI runs several test files at once) can take well over
// 10 s to answer its first request; this waits for readiness, it asserts no latency.
export async function waitHttpOk(url: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(url, async () => (await fetch(url)).ok, timeoutMs);
}

/** Starts limiterd and N API processes on free ports, each its own `bun run` process. */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const dataDir = tempDir();
  const limiterPort = await freePort();
  const limiterUrl = `${opts.certs ? "https" : "http"}://127.0.0.1:${limiterPort}`;
  const roleEnv = (role: Role) => (opts.certs ? clientTlsEnv(opts.certs, role) : {});
  const base = {
    DATA_DIR: dataDir,
    LIMITER_URL: limiterUrl,
    // A loaded CI machine can hold a call to the daemon past the 1 s default; a test of the
    // deadline itself sets its own.
    LIMITER_TIMEOUT_MS: "5000",
    ...(opts.redisUrl ? { REDIS_URL: opts.redisUrl } : {}),
    ...(opts.redisClusterNodes ? { REDIS_CLUSTER_NODES: opts.redisClusterNodes.join(",") } : {}),
    ...opts.env,
  };
  const env: Record<string, string> = {
    ...base,
    LIMITER_PORT: String(limiterPort),
    ...(opts.certs ? daemonTlsEnv(opts.certs) : {}),
  };
  const limiterd = runBun("cmd/limiterd/index.ts", [], env);
  const apis: Proc[] = [];
  const workers: Proc[] = [];
  const startWorker = (extra: Record<string, string> = {}) => {
    const w = runBun("cmd/worker/index.ts", [], { ...env, ...roleEnv("worker"), ...extra });
    workers.push(w);
    return w;
  };
  const apiUrls: string[] = [];
  for (let i = 0; i < (opts.apis ?? 1); i++) {
    const port = await freePort();
    apis.push(runBun("cmd/api/index.ts", [], { ...base, ...roleEnv("front"), API_PORT: String(port) }));
    apiUrls.push(`http://127.0.0.1:${port}`);
  }
  for (const url of apiUrls) await waitHttpOk(`${url}/readyz`);
  for (let i = 0; i < (opts.workers ?? 0); i++) startWorker();
  const admin = (...args: string[]) => runToEnd("cmd/admin/index.ts", args, { ...base, ...roleEnv("admin") });
  const stack: Stack = {
    limiterUrl,
    credential: limiterCredential({ ...base, ...roleEnv("admin") }),
    apiUrls,
    dataDir,
    env,
    limiterd,
    apis,
    workers,
    startWorker,
    admin,
    async restartLimiterd() {
      await stack.limiterd.stop("SIGKILL");
      stack.limiterd = runBun("cmd/limiterd/index.ts", [], env);
      for (const url of apiUrls) await waitHttpOk(`${url}/readyz`);
    },
    async org(slug, plan) {
      for (const args of [
        ["org", "create", slug, "--plan", plan],
        ["domain", "add", slug, `${slug}.example`, "--verified"],
      ]) {
        const r = await admin(...args);
        if (r.code !== 0) throw new Error(`${args.join(" ")}: ${r.stderr}`);
      }
      const token = await admin("token", "create", slug);
      if (token.code !== 0) throw new Error(`token create: ${token.stderr}`);
      return token.stdout.trim();
    },
    async stop() {
      await Promise.all([...apis, ...workers, stack.limiterd].map((p) => p.stop("SIGKILL")));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}

export interface SendAnswer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

let forwardedSeq = 0;

/**
 * POSTs one email. With viaProxy, the request carries a fresh X-Forwarded-For address so that
 * a stack started with TRUST_PROXY=127.0.0.1 does not hold the test to one IP's 500/s.
 */
export async function sendEmail(
  apiUrl: string,
  token: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  viaProxy = false,
): Promise<SendAnswer> {
  const n = ++forwardedSeq;
  const res = await fetch(`${apiUrl}/api/v1/emails`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${token}`,
      "Content-Type": "application/json",
      ...(viaProxy ? { "X-Forwarded-For": `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` } : {}),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith("{") ? JSON.parse(text) : { text } };
}

/** Runs fn for 0..n-1 with at most `concurrency` calls in flight, results in order. */
export async function pool<T>(n: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

/** GETs a JSON endpoint of the API; with viaProxy, from a fresh X-Forwarded-For address (see sendEmail). */
export async function getJson(url: string, token: string, viaProxy = false): Promise<SendAnswer> {
  const n = ++forwardedSeq;
  const res = await fetch(url, {
    headers: {
      Authorization: `Bearer ${token}`,
      ...(viaProxy ? { "X-Forwarded-For": `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` } : {}),
    },
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith("{") ? JSON.parse(text) : { text } };
}

export interface RedisClusterServer {
  /** host:port of every primary at the start, as REDIS_CLUSTER_NODES takes them. */
  nodes: string[];
  ports: number[];
  /** Kills one node with SIGKILL (a failover needs replicas: see startRedisCluster's option). */
  kill(port: number): Promise<void>;
  /** Starts a killed node again on its port and directory; it rejoins the cluster from its nodes.conf. */
  restart(port: number): Promise<void>;
  /** Stops a node (SIGSTOP) as a partition would, and lets it go on. */
  pause(port: number): void;
  resume(port: number): void;
  /** The port of the replica of a primary, as the cluster says now. */
  replicaOf(primaryPort: number): Promise<number>;
  /** Runs redis-cli against one node; its output. */
  cli(port: number, ...args: string[]): Promise<string>;
  /** The port of the primary that serves the slot of the key, as the cluster says now. */
  primaryOf(key: string): Promise<number>;
  /** Whether every node answering says cluster_state:ok and the key's slot has a live primary. */
  healthy(key: string): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * Starts a Redis Cluster of three primaries of the test's own (redis-server --cluster-enabled,
 * redis-cli --cluster create); with `replicas: 1`, each primary has a replica that takes over
 * when it dies (after `nodeTimeoutMs`).
 */
export async function startRedisCluster(
  opts: { replicas?: 0 | 1; nodeTimeoutMs?: number; aof?: boolean } = {},
): Promise<RedisClusterServer> {
  const replicas = opts.replicas ?? 0;
  const dir = tempDir("mailcore-cluster-");
  const ports: number[] = [];
  for (let i = 0; i < 3 * (1 + replicas); i++) ports.push(await freePort());
  const procs = new Map<number, Subprocess>();
  const launch = (port: number) => {
    const nodeDir = join(dir, String(port));
    mkdirSync(nodeDir, { recursive: true });
    const args = [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      "nodes.conf",
      "--cluster-node-timeout",
      String(opts.nodeTimeoutMs ?? 15_000),
    ];
    const persistence = opts.aof ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"];
    procs.set(
      port,
      spawn(["redis-server", ...args, "--save", "", ...persistence, "--dir", nodeDir], {
        stdout: "ignore",
        stderr: "ignore",
      }),
    );
  };
  for (const port of ports) launch(port);
  const cli = async (args: string[]) => {
    const res = spawn(["redis-cli", ...args], { stdout: "pipe", stderr: "pipe" });
    const [out] = await Promise.all([new Response(res.stdout).text(), res.exited]);
    return out;
  };
  const alive = () => ports.filter((p) => procs.get(p)?.exitCode === null && procs.get(p)?.signalCode === null);
  const primaryOf = async (key: string) => {
    const asker = alive()[0]!;
    const slot = Number((await cli(["-p", String(asker), "cluster", "keyslot", key])).trim());
    // CLUSTER NODES: <id> <ip:port@bus> <flags> <primary> <ping> <pong> <epoch> <link> <slot ranges...>
    for (const line of (await cli(["-p", String(asker), "cluster", "nodes"])).trim().split("\n")) {
      const [, address, flags, , , , , link, ...ranges] = line.split(" ");
      if (!flags?.includes("master") || flags.includes("fail") || link !== "connected") continue;
      const serves = ranges.some((r) => {
        const [lo, hi] = r.split("-").map(Number);
        return slot >= lo! && slot <= (hi ?? lo!);
      });
      if (serves) return Number(address!.split("@")[0]!.split(":")[1]);
    }
    throw new Error(`no live primary serves the slot of ${key}`);
  };
  const stopAll = async () => {
    for (const p of procs.values()) {
      p.kill("SIGCONT");
      p.kill("SIGKILL");
    }
    await Promise.all([...procs.values()].map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  };
  const initialPrimaries = new Set<number>();
  try {
    for (const port of ports)
      await waitFor(`redis-server on ${port}`, async () => (await cli(["-p", String(port), "ping"])).trim() === "PONG");
    await cli([
      "--cluster",
      "create",
      ...ports.map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      String(replicas),
      "--cluster-yes",
    ]);
    for (const port of ports) {
      await waitFor(
        `cluster state ok on ${port}`,
        async () => (await cli(["-p", String(port), "cluster", "info"])).includes("cluster_state:ok"),
        60_000,
      );
    }
    for (const line of (await cli(["-p", String(ports[0]), "cluster", "nodes"])).trim().split("\n")) {
      const [, address, flags] = line.split(" ");
      if (flags?.includes("master")) initialPrimaries.add(Number(address!.split("@")[0]!.split(":")[1]));
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  // With replicas, redis-cli chooses which node of each pair is the primary.
  const primaries = ports.filter((p) => replicas === 0 || initialPrimaries.has(p));
  return {
    nodes: primaries.map((p) => `127.0.0.1:${p}`),
    ports,
    async kill(port) {
      const p = procs.get(port);
      p?.kill("SIGKILL");
      await p?.exited;
    },
    async restart(port) {
      launch(port);
      await waitFor(`redis-server on ${port}`, async () => (await cli(["-p", String(port), "ping"])).trim() === "PONG");
    },
    pause: (port) => procs.get(port)?.kill("SIGSTOP"),
    resume: (port) => procs.get(port)?.kill("SIGCONT"),
    async replicaOf(primaryPort) {
      const lines = (await cli(["-p", String(primaryPort), "cluster", "nodes"])).trim().split("\n");
      const id = lines.find((l) => l.includes("myself"))!.split(" ")[0];
      const replica = lines.find((l) => l.split(" ")[3] === id);
      if (!replica) throw new Error(`no replica of ${primaryPort}`);
      return Number(replica.split(" ")[1]!.split("@")[0]!.split(":")[1]);
    },
    cli: (port, ...args) => cli(["-p", String(port), ...args]),
    primaryOf,
    async healthy(key) {
      const states = await Promise.all(alive().map((p) => cli(["-p", String(p), "cluster", "info"])));
      if (!states.every((s) => s.includes("cluster_state:ok"))) return false;
      return primaryOf(key).then(
        () => true,
        () => false,
      );
    },
    stop: stopAll,
  };
}

/** An SMTP front started by startSmtp. */
export interface SmtpProc {
  port: number;
  proc: Proc;
}

/** Starts cmd/smtp against the stack on a free port; env adds to or overrides its variables. */
export async function startSmtp(stack: Stack, env: Record<string, string> = {}): Promise<SmtpProc> {
  const port = await freePort();
  const proc = runBun("cmd/smtp/index.ts", [], {
    DATA_DIR: stack.dataDir,
    LIMITER_URL: stack.limiterUrl,
    API_URL: stack.apiUrls[0]!,
    SMTP_PORT: String(port),
    ...env,
  });
  await waitFor(`smtp on ${port}`, async () => proc.stderr().includes('"msg":"listening"'), 15_000);
  return { port, proc };
}

/** What the inbound MX logs of each report it answered. */
export interface InboundReport {
  rcpt: string;
  /** Its reply's code and enhanced code ("250 2.0.0"), and the text after them. */
  reply: string;
  said: string;
  /** From the end of DATA to limiterd's answer: the report applied, a bounce's cooldown in effect. */
  ms: number;
}

/** An inbound MX started by startInbound. */
export interface InboundProc {
  host: string;
  port: number;
  metricsPort: number;
  proc: Proc;
  /** The reports it answered so far, from its log. */
  reports(): InboundReport[];
}

/** Starts cmd/inbound against the stack's daemon on host and a free port; env adds to or overrides its variables. */
export async function startInbound(stack: Stack, host: string, env: Record<string, string> = {}): Promise<InboundProc> {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const proc = runBun("cmd/inbound/index.ts", [], {
    ...stack.env,
    INBOUND_HOST: host,
    INBOUND_PORT: String(port),
    INBOUND_METRICS_PORT: String(metricsPort),
    ...env,
  });
  await waitFor("inbound listening", async () => proc.stderr().includes('"msg":"listening"'), 15_000);
  const reports = () =>
    proc
      .stderr()
      .split("\n")
      .filter((l) => l.includes('"msg":"report"'))
      .map((l) => JSON.parse(l) as InboundReport);
  return { host, port, metricsPort, proc, reports };
}
