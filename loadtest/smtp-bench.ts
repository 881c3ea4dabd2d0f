// The SMTP front's benchmark: bun run loadtest/smtp-bench.ts [--flag value ...]; loadtest/bench.ts
// runs it too (smtpBench). Everything runs on this machine and talks to 127.0.0.1 only;
// every process it starts is its own (limiterd on the embedded store, api, smtp), started
// fresh and stopped on exit.
//
// 1. Throughput: `concurrency` nodemailer clients for `duration` seconds, each sending one
//    message per SMTP session (connect, STARTTLS, AUTH, MAIL, RCPT, DATA, QUIT), then the
//    same over pooled connections (one session, many messages), against the ceiling: the
//    same bodies POSTed straight to the API with the same concurrency.
// 2. Latency: `samples` messages one at a time, each in its own SMTP session, against a
//    direct POST of the same body; p50 / p99 and the difference.
// Recipients are fixture addresses (delivered+N@fixtures.test: no recipient guards) spread
// over several enterprise organizations (2000 requests/min each) so the quota never binds.
import { connect } from "node:net";
import { cpus } from "node:os";
import { freePort, pool, runBun, type Stack, sendEmail, startStack, waitFor } from "../internal/testkit/testkit";
import { type CpuReport, cpuWindow, type Memory, memory } from "./procs";
import { type Org, smtpTransport } from "./smtpclient";
import { percentile } from "./report";

export const SMTP_DEFAULTS = { duration: 10, concurrency: 32, samples: 200, orgs: 12, warmup: 2 };
export type SmtpSettings = typeof SMTP_DEFAULTS;

function parseFlags(argv: string[]): SmtpSettings {
  const s = { ...SMTP_DEFAULTS };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "") as keyof SmtpSettings;
    const value = Number(argv[i + 1]);
    if (!(name in s) || !argv[i]!.startsWith("--") || !Number.isFinite(value) || value <= 0 || value > 10_000) {
      throw new Error(
        `usage: bun run loadtest/smtp-bench.ts [${Object.keys(SMTP_DEFAULTS)
          .map((k) => `--${k} N`)
          .join("] [")}]`,
      );
    }
    s[name] = value;
  }
  if (s.duration > 120) throw new Error("--duration is at most 120 seconds");
  return s;
}

let seq = 0;
const message = (org: Org) => {
  const n = ++seq;
  return {
    from: `Bench <no-reply@${org.slug}.example>`,
    to: `delivered+${n}@fixtures.test`,
    subject: `Your code ${n}`,
    text: `Your code is **${100000 + (n % 900000)}**.`,
  };
};

const pct = (sorted: number[], p: number) => percentile(sorted, p) ?? Number.NaN;
const ms = (n: number) => `${n.toFixed(1)} ms`;
const p50p99 = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return { p50: pct(sorted, 50), p99: pct(sorted, 99) };
};

export interface SmtpRun {
  ok: number;
  seconds: number;
  perSecond: number;
  refused: Record<string, number>;
  latencyMs: { p50: number; p99: number };
  cpu: CpuReport;
}

export interface SmtpBenchResult {
  settings: SmtpSettings;
  runs: { session: SmtpRun; pooled: SmtpRun; post: SmtpRun };
  /** One message at a time; `added` is SMTP minus direct POST. */
  latency: Record<"smtp" | "post" | "greeting" | "added", { p50: number; p99: number }>;
  /** smtp, api and limiterd, read right after the last SMTP run. */
  memory: Record<string, Memory>;
}

/**
 * Runs `concurrency` loops of `one` until the deadline. Each call goes to the next
 * organization in turn; with `pinned`, a loop keeps one organization (a pooled session is
 * authenticated once). CPU is read over the run for `pids`.
 */
async function closedLoop(
  s: SmtpSettings,
  orgs: Org[],
  seconds: number,
  pids: Record<string, number>,
  one: (org: Org, loop: number) => Promise<string | undefined>,
  pinned = false,
): Promise<SmtpRun> {
  const refused: Record<string, number> = {};
  const latencies: number[] = [];
  const close = cpuWindow(pids, cpus().length);
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: s.concurrency }, async (_, loop) => {
      let i = 0;
      while (performance.now() < deadline) {
        const org = orgs[pinned ? loop % orgs.length : (loop + i++ * s.concurrency) % orgs.length]!;
        const t0 = performance.now();
        const refusal = await one(org, loop).catch((err: Error & { response?: string }) =>
          (err.response ?? err.message).slice(0, 40),
        );
        if (refusal === undefined) latencies.push(performance.now() - t0);
        else refused[refusal] = (refused[refusal] ?? 0) + 1;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return {
    ok: latencies.length,
    seconds: elapsed,
    perSecond: latencies.length / elapsed,
    refused,
    latencyMs: p50p99(latencies),
    cpu: close(),
  };
}

/** Milliseconds from TCP connect to the server's 220 greeting. */
function timeToGreeting(port: number): Promise<number> {
  return new Promise((done, fail) => {
    const t0 = performance.now();
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("data", () => {
      done(performance.now() - t0);
      socket.end("QUIT\r\n");
    });
    socket.once("error", fail);
  });
}

/** The whole benchmark; `onStop` receives the function that stops what it started (for signal handlers). */
export async function smtpBench(
  s: SmtpSettings,
  log: (line: string) => void,
  onStop: (stop: () => Promise<void>) => void,
): Promise<SmtpBenchResult> {
  // TRUST_PROXY: the API believes X-Forwarded-For from 127.0.0.1, where both the SMTP front
  // and the ceiling's POSTs (each with a client IP of its own) come from.
  const stack: Stack = await startStack({ env: { TRUST_PROXY: "127.0.0.1" } });
  let smtp: ReturnType<typeof runBun> | undefined;
  const stop = async () => {
    await smtp?.stop("SIGKILL");
    await stack.stop();
  };
  onStop(stop);
  try {
    const orgs = await pool(
      s.orgs,
      4,
      async (i): Promise<Org> => ({ slug: `bench${i}`, token: await stack.org(`bench${i}`, "enterprise") }),
    );
    const port = await freePort();
    smtp = runBun("cmd/smtp/index.ts", [], {
      DATA_DIR: stack.dataDir,
      LIMITER_URL: stack.limiterUrl,
      API_URL: stack.apiUrls[0]!,
      SMTP_PORT: String(port),
      SMTP_MAX_CLIENTS: String(s.concurrency * 2 + 10),
      SMTP_MAX_CLIENTS_PER_IP: String(s.concurrency * 2 + 10),
    });
    await waitFor("the smtp front", async () => smtp!.stderr().includes('"msg":"listening"'), 15_000);
    const api = stack.apiUrls[0]!;
    // The nodemailer clients and the POSTs run in this process.
    const pids = {
      smtp: smtp.proc.pid,
      api: stack.apis[0]!.proc.pid,
      limiterd: stack.limiterd.proc.pid,
      "clients (this process)": process.pid,
    };

    const viaSession = async (org: Org, loop = 0) => {
      const tr = smtpTransport(port, org, false, loop);
      try {
        const info = await tr.sendMail(message(org));
        return info.response.startsWith("250") ? undefined : info.response.slice(0, 40);
      } finally {
        tr.close();
      }
    };
    const viaPost = async (org: Org) => {
      const r = await sendEmail(api, org.token, message(org), {}, true);
      return r.status === 202 ? undefined : `HTTP ${r.status} ${String(r.body.code ?? r.body.message ?? "")}`;
    };
    const pools = new Map<number, ReturnType<typeof smtpTransport>>();
    const viaPool = async (org: Org, loop: number) => {
      let tr = pools.get(loop);
      if (!tr) {
        tr = smtpTransport(port, org, true, loop);
        pools.set(loop, tr);
      }
      const info = await tr.sendMail(message(org));
      return info.response.startsWith("250") ? undefined : info.response.slice(0, 40);
    };

    log(
      `SMTP: ${s.concurrency} concurrent clients, ${s.duration} s per run (warm-up ${s.warmup} s), ${s.orgs} enterprise organizations, embedded store`,
    );
    await closedLoop(s, orgs, s.warmup, pids, viaSession);
    const session = await closedLoop(s, orgs, s.duration, pids, viaSession);
    const pooled = await closedLoop(s, orgs, s.duration, pids, viaPool, true);
    const mem = memory({ smtp: pids.smtp, api: pids.api, limiterd: pids.limiterd });
    for (const tr of pools.values()) tr.close();
    const post = await closedLoop(s, orgs, s.duration, pids, viaPost);

    // Latency, one at a time, interleaved so that both see the same machine.
    log(`SMTP: latency, ${s.samples} messages one at a time`);
    const smtpLat: number[] = [];
    const postLat: number[] = [];
    for (let i = 0; i < s.samples; i++) {
      const org = orgs[i % orgs.length]!;
      for (const [fn, into] of [
        [viaSession, smtpLat],
        [viaPost, postLat],
      ] as const) {
        const t0 = performance.now();
        const refusal = await fn(org);
        if (refusal !== undefined) throw new Error(`latency run refused: ${refusal}`);
        into.push(performance.now() - t0);
      }
    }
    // The bare floor of a session: TCP connect to the 220 greeting.
    const greetLat: number[] = [];
    for (let i = 0; i < Math.min(s.samples, 50); i++) greetLat.push(await timeToGreeting(port));
    const [smtpP, postP] = [p50p99(smtpLat), p50p99(postLat)];
    return {
      settings: s,
      runs: { session, pooled, post },
      latency: {
        smtp: smtpP,
        post: postP,
        greeting: p50p99(greetLat),
        added: { p50: smtpP.p50 - postP.p50, p99: smtpP.p99 - postP.p99 },
      },
      memory: mem,
    };
  } finally {
    await stop();
  }
}

async function main() {
  const s = parseFlags(process.argv.slice(2));
  const r = await smtpBench(s, console.log, (stop) => {
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => void stop().then(() => process.exit(130)));
  });
  console.log("\nthroughput (messages accepted per second; refusals by reason)");
  for (const [name, run] of [
    ["SMTP, one message per session", r.runs.session],
    ["SMTP, pooled sessions", r.runs.pooled],
    ["ceiling: direct POST /api/v1/emails", r.runs.post],
  ] as const) {
    const refused =
      Object.entries(run.refused)
        .map(([k, v]) => `${v}x ${k}`)
        .join("; ") || "none";
    console.log(
      `  ${name.padEnd(38)} ${run.perSecond.toFixed(1).padStart(7)}/s  (${run.ok} in ${run.seconds.toFixed(1)} s; p50 ${ms(run.latencyMs.p50)}, p99 ${ms(run.latencyMs.p99)}; refused: ${refused})`,
    );
  }
  console.log(`\nlatency, ${s.samples} messages one at a time (SMTP: a new session each, connect to 250)`);
  console.log(`  ${"".padEnd(26)} ${"p50".padStart(9)} ${"p99".padStart(9)}`);
  for (const [name, l] of [
    ["SMTP session", r.latency.smtp],
    ["direct POST", r.latency.post],
    ["of which: connect to 220", r.latency.greeting],
    ["added by SMTP", r.latency.added],
  ] as const) {
    console.log(`  ${name.padEnd(26)} ${ms(l.p50).padStart(9)} ${ms(l.p99).padStart(9)}`);
  }
}

if (import.meta.main) {
  await main();
  process.exit(0);
}
