import { Code, ConnectError } from "@connectrpc/connect";
import { type Subprocess, spawn } from "bun";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { LimiterClients } from "../limiterclient/client";
import { withAllocatorEnv } from "../config/allocator";

// The one-command dev stack: each process of the service as a child process with its
// output prefixed, started in order, stopped together.

export interface Child {
  name: string;
  entry: string;
}

const COLORS = ["\x1b[36m", "\x1b[35m", "\x1b[33m", "\x1b[32m", "\x1b[34m"];

async function pipeLines(stream: ReadableStream<Uint8Array>, prefix: string, to: NodeJS.WriteStream): Promise<void> {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of stream) {
    const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
    rest = lines.pop()!;
    for (const line of lines) to.write(`${prefix}${line}\n`);
  }
  if (rest) to.write(`${prefix}${rest}\n`);
}

export class DevStack {
  private readonly procs: { name: string; proc: Subprocess }[] = [];
  private stopping = false;

  constructor(
    private readonly repoRoot: string,
    private readonly env: Record<string, string | undefined>,
  ) {}

  start(child: Child): void {
    const color = process.stdout.isTTY ? COLORS[this.procs.length % COLORS.length]! : "";
    const prefix = `${color}${child.name.padEnd(9)}|${color ? "\x1b[0m" : ""} `;
    const proc = spawn([process.execPath, "run", join(this.repoRoot, child.entry)], {
      cwd: this.repoRoot,
      env: withAllocatorEnv(this.env),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    void pipeLines(proc.stdout, prefix, process.stdout);
    void pipeLines(proc.stderr, prefix, process.stderr);
    this.procs.push({ name: child.name, proc });
    void proc.exited.then((code) => {
      if (this.stopping) return;
      process.stderr.write(`${child.name} exited with code ${code}; stopping the stack\n`);
      void this.stop(1);
    });
  }

  async stop(code: number): Promise<never> {
    this.stopping = true;
    for (const { proc } of [...this.procs].reverse()) proc.kill("SIGTERM");
    await Promise.race([Promise.all(this.procs.map((p) => p.proc.exited)), Bun.sleep(3_000)]);
    for (const { proc } of this.procs) proc.kill("SIGKILL");
    process.exit(code);
  }
}

export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await Bun.sleep(100);
  }
  throw new Error(`${what} did not come up within ${timeoutMs / 1000} s`);
}

export async function limiterServing(clients: LimiterClients): Promise<boolean> {
  const res = await clients.health.check({}, { timeoutMs: 1_000 });
  return res.status === HealthCheckResponse_ServingStatus.SERVING;
}

export const DEMO = { slug: "demo", domain: "demo.example.com", email: "demo@demo.example.com" };

/**
 * On the first start, creates the demo organization (free plan), a verified domain, a token
 * and a console user, and returns the token and the user's password (both shown once);
 * undefined when the demo organization already exists.
 */
export async function bootstrapDemo(clients: LimiterClients): Promise<{ token: string; password: string } | undefined> {
  const { directory } = clients;
  try {
    await directory.getOrganization({ slug: DEMO.slug });
    return undefined;
  } catch (err) {
    if (!(err instanceof ConnectError) || err.code !== Code.NotFound) throw err;
  }
  await directory.createOrganization({ slug: DEMO.slug, plan: Plan.FREE });
  await directory.addDomain({ slug: DEMO.slug, domain: DEMO.domain, verified: true });
  const password = randomBytes(12).toString("base64url");
  await clients.console.createUser({ slug: DEMO.slug, email: DEMO.email, password });
  return { token: (await directory.createToken({ slug: DEMO.slug })).token, password };
}
