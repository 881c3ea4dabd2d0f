// A full disk under every process: limiterd, an API, a worker and an SMTP front, with DATA_DIR on
// a small tmpfs the test mounts (as root) and fills while a burst of sends is delivered. Every
// process lives through it: the API refuses with a JSON 503 (never a 500), the worker defers the
// messages its sink cannot write and holds the acks its journal cannot, the SMTP front serves a
// development certificate it could not keep; each says so in a log line and a metric, and goes on
// when space is back. Every message answered 202 is delivered exactly once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawnSync } from "bun";
import { closeSync, existsSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import {
  freePort,
  type Proc,
  pool,
  type SmtpProc,
  sendEmail,
  type Stack,
  startSmtp,
  startStack,
  tempDir,
  waitFor,
} from "../testkit/testkit";

/** The filesystem under DATA_DIR: room for the stores and a burst, filled by the test when it wants. */
const SIZE = "24m";
const BURST = 120;

let mount: string;
let stack: Stack;
let token: string;
let worker: Proc;
let smtp: SmtpProc | undefined;
const ports = { limiterd: 0, worker: 0 };

/** Mounts a tmpfs at dir; only root may (a test that cannot, fails: it never skips). */
function mountSmall(dir: string): void {
  if (process.getuid?.() !== 0)
    throw new Error("this test mounts a small tmpfs as DATA_DIR (mount -t tmpfs), which needs root");
  const r = spawnSync(["mount", "-t", "tmpfs", "-o", `size=${SIZE}`, "tmpfs", dir]);
  if (r.exitCode !== 0) throw new Error(`mount -t tmpfs: ${r.stderr.toString()}`);
}

const FILLER = () => join(mount, "filler");

/** Writes the filler until the filesystem refuses a page; again on each call (the processes free some). */
function fill(): void {
  const fd = openSync(FILLER(), "a");
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10, 512]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (err) {
        if ((err as { code?: string }).code !== "ENOSPC") throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** The JSON lines a process wrote (its log), parsed. */
const logLines = (p: Proc) =>
  (p.stderr() + p.stdout())
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** A counter of mailcore_disk_full_total, as a process's metrics endpoint serves it (0 when not yet counted). */
async function diskFull(port: number, file: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`mailcore_disk_full_total{file="${file}"`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

const send = (i: number) =>
  sendEmail(stack.apiUrls[0]!, token, {
    from: "no-reply@full.example",
    to: `r${i}@dest.example`,
    subject: `Full ${i}`,
    text: "x".repeat(2_000),
  });

beforeAll(async () => {
  mount = tempDir("mailcore-full-disk-");
  mountSmall(mount);
  ports.limiterd = await freePort();
  ports.worker = await freePort();
  stack = await startStack({
    env: {
      DATA_DIR: mount,
      LIMITER_METRICS_PORT: String(ports.limiterd),
      // A deferral is retried soon and often: the test waits for the disk, not for the backoff.
      RETRY_BASE_MS: "300",
      MAX_ATTEMPTS: "50",
    },
  });
  token = await stack.org("full", "enterprise");
  worker = stack.startWorker({ WORKER_METRICS_PORT: String(ports.worker) });
});

afterAll(async () => {
  await smtp?.proc.stop("SIGKILL");
  await stack?.stop();
  if (mount) {
    spawnSync(["umount", mount]);
    rmSync(mount, { recursive: true, force: true });
  }
});

test("a disk that fills during a burst of sends: every process lives, says so, and every accepted message is delivered once", async () => {
  const accepted: string[] = [];
  const answers = new Map<number, number>();
  const note = (r: Awaited<ReturnType<typeof send>>) => {
    answers.set(r.status, (answers.get(r.status) ?? 0) + 1);
    if (r.status === 202) accepted.push(r.body.id as string);
    else {
      // A refusal is a clear JSON 503, the one a client retries.
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 503, code: "LIMITER_UNAVAILABLE" });
      expect(r.headers.get("Retry-After")).toBe("1");
    }
  };
  // A burst the lane releases over three seconds: the worker holds its next two seconds when the disk fills.
  for (const r of await pool(BURST, 8, send)) note(r);
  expect(accepted.length).toBe(BURST);
  await waitFor(
    "the worker's first deliveries",
    async () => existsSync(join(mount, "sink")) && readdirSync(join(mount, "sink")).length > 0,
  );

  fill();
  const fullUntil = performance.now() + 8_000;
  const topUp = setInterval(fill, 100);
  try {
    // While it is full: sends are refused (or, now and then, accepted in a page the processes freed).
    for (let i = BURST; performance.now() < fullUntil; i++) {
      note(await send(i));
      await Bun.sleep(100);
    }
    // The SMTP front starts on the full disk: it cannot keep its development certificate.
    smtp = await startSmtp(stack, { DATA_DIR: mount });
  } finally {
    clearInterval(topUp);
  }
  expect(answers.get(503)).toBeGreaterThan(0);
  for (const p of [stack.limiterd, ...stack.apis, worker, smtp.proc]) expect(p.proc.exitCode).toBeNull();
  expect(await diskFull(ports.limiterd, "store")).toBeGreaterThan(0);
  expect((await diskFull(ports.worker, "sink")) + (await diskFull(ports.worker, "acks"))).toBeGreaterThan(0);
  for (const p of [stack.limiterd, worker, smtp.proc])
    expect(logLines(p).some((l) => l.msg === "disk full: writes refused until there is space")).toBe(true);
  require("node:fs").writeFileSync("/tmp/df_worker.log", worker.stderr());
  expect(logLines(smtp.proc).find((l) => l.msg === "disk full: writes refused until there is space")).toMatchObject({
    file: "certificate",
  });

  rmSync(FILLER());
  for (let i = 0; i < 10; i++) note(await send(100_000 + i));
  expect(answers.get(202)).toBeGreaterThanOrEqual(BURST + 10);

  // Every message answered 202: delivered by one delivery alone (the worker's lines), in the
  // sink, and so by its status.
  const deliveries = () => {
    const count = new Map<string, number>();
    for (const l of logLines(worker))
      if (l.msg === "delivered") count.set(String(l.message), (count.get(String(l.message)) ?? 0) + 1);
    return count;
  };
  await waitFor("every accepted message delivered", async () => accepted.every((id) => deliveries().has(id)), 90_000);
  const sink = new Set(readdirSync(join(mount, "sink")));
  expect(accepted.filter((id) => !sink.has(`${id}.eml`))).toEqual([]);
  const delivered = deliveries();
  expect(accepted.filter((id) => delivered.get(id) !== 1)).toEqual([]);
  expect(delivered.size).toBe(accepted.length);
  const status = async (id: string) => {
    const res = await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    return ((await res.json()) as { status: string }).status;
  };
  await waitFor("the daemon's statuses", async () => (await status(accepted.at(-1)!)) === "delivered");
  const notDelivered: string[] = [];
  for (const id of accepted) if ((await status(id)) !== "delivered") notDelivered.push(id);
  expect(notDelivered).toEqual([]);
  for (const p of [stack.limiterd, worker]) expect(logLines(p).some((l) => l.msg === "disk space back")).toBe(true);
  for (const p of [stack.limiterd, ...stack.apis, worker, smtp.proc]) expect(p.proc.exitCode).toBeNull();
}, 180_000);
