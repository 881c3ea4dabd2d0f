// Helpers for tests that start real things: a redis-server of their own on a free port,
// and the project's processes as separate `bun run cmd/...` processes.
import { type Subprocess, spawn } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

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

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await Bun.sleep(25);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export interface RedisServer {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts a redis-server of the test's own on a free port, nothing persisted. */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const dir = tempDir("mailcore-redis-");
  const proc = spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
    stdout: "ignore",
    stderr: "pipe",
  });
  await waitFor(`redis-server on ${port}`, async () => {
    const res = spawn(["redis-cli", "-p", String(port), "ping"], { stdout: "pipe", stderr: "ignore" });
    return (await new Response(res.stdout).text()).trim() === "PONG";
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      proc.kill("SIGKILL");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Proc {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** What the process wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves when both streams are drained (after exit). */
  drained: Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<number>;
}

/** Runs `bun run <entry> ...args` from the repo root as its own process. */
export function runBun(entry: string, args: string[], env: Record<string, string>): Proc {
  const proc = spawn([process.execPath, "run", entry, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdin: "ignore",
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
export async function runToEnd(entry: string, args: string[], env: Record<string, string>) {
  const p = runBun(entry, args, env);
  const code = await p.proc.exited;
  await p.drained;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

export interface Stack {
  limiterUrl: string;
  apiUrls: string[];
  dataDir: string;
  limiterd: Proc;
  apis: Proc[];
  /** Runs the admin CLI against this stack's daemon. */
  admin(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Creates an organization with a token; returns the token. */
  org(slug: string, plan: string): Promise<string>;
  stop(): Promise<void>;
}

export interface StackOptions {
  redisUrl?: string;
  apis?: number;
  env?: Record<string, string>;
}

export async function waitHttpOk(url: string, timeoutMs = 10_000): Promise<void> {
  await waitFor(url, async () => (await fetch(url)).ok, timeoutMs);
}

/** Starts limiterd and N API processes on free ports, each its own `bun run` process. */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const dataDir = tempDir();
  const limiterPort = await freePort();
  const limiterUrl = `http://127.0.0.1:${limiterPort}`;
  const base = { DATA_DIR: dataDir, LIMITER_URL: limiterUrl, ...(opts.redisUrl ? { REDIS_URL: opts.redisUrl } : {}), ...opts.env };
  const limiterd = runBun("cmd/limiterd/index.ts", [], { ...base, LIMITER_PORT: String(limiterPort) });
  const apis: Proc[] = [];
  const apiUrls: string[] = [];
  for (let i = 0; i < (opts.apis ?? 1); i++) {
    const port = await freePort();
    apis.push(runBun("cmd/api/index.ts", [], { ...base, API_PORT: String(port) }));
    apiUrls.push(`http://127.0.0.1:${port}`);
  }
  for (const url of apiUrls) await waitHttpOk(`${url}/readyz`);
  const admin = (...args: string[]) => runToEnd("cmd/admin/index.ts", args, base);
  return {
    limiterUrl,
    apiUrls,
    dataDir,
    limiterd,
    apis,
    admin,
    async org(slug, plan) {
      const created = await admin("org", "create", slug, "--plan", plan);
      if (created.code !== 0) throw new Error(`org create: ${created.stderr}`);
      const token = await admin("token", "create", slug);
      if (token.code !== 0) throw new Error(`token create: ${token.stderr}`);
      return token.stdout.trim();
    },
    async stop() {
      await Promise.all([...apis, limiterd].map((p) => p.stop("SIGKILL")));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
