// The SMTP front's benchmark: bun run loadtest/smtp-bench.ts [--flag value ...].
// Everything runs on this machine and talks to 127.0.0.1 only; every process it starts is
// its own (limiterd on the embedded store, api, smtp), started fresh and stopped on exit.
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
import { freePort, runBun, type Stack, sendEmail, startStack, waitFor } from "../internal/testkit/testkit";
import { type Org, smtpTransport } from "./smtpclient";

const DEFAULTS = { duration: 10, concurrency: 32, samples: 200, orgs: 12, warmup: 2 };
type Settings = typeof DEFAULTS;

function parseFlags(argv: string[]): Settings {
  const s = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "") as keyof Settings;
    const value = Number(argv[i + 1]);
    if (!(name in s) || !argv[i]!.startsWith("--") || !Number.isFinite(value) || value <= 0 || value > 10_000) {
      throw new Error(`usage: bun run loadtest/smtp-bench.ts [${Object.keys(DEFAULTS).map((k) => `--${k} N`).join("] [")}]`);
    }
    s[name] = value;
  }
  if (s.duration > 120) throw new Error("--duration is at most 120 seconds");
  return s;
}

let seq = 0;
const message = (org: Org) => {
  const n = ++seq;
  return { from: `Bench <no-reply@${org.slug}.example>`, to: `delivered+${n}@fixtures.test`, subject: `Your code ${n}`, text: `Your code is **${100000 + (n % 900000)}**.` };
};

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
const ms = (n: number) => `${n.toFixed(1)} ms`;

interface Tally {
  ok: number;
  refused: Map<string, number>;
  latencies: number[];
}

const tally = (): Tally => ({ ok: 0, refused: new Map(), latencies: [] });
const refuse = (t: Tally, what: string) => t.refused.set(what, (t.refused.get(what) ?? 0) + 1);

/**
 * Runs `concurrency` loops of `one` until the deadline. Each call goes to the next
 * organization in turn; with `pinned`, a loop keeps one organization (a pooled session is
 * authenticated once).
 */
async function closedLoop(
  s: Settings,
  orgs: Org[],
  seconds: number,
  one: (org: Org, loop: number) => Promise<string | undefined>,
  pinned = false,
): Promise<Tally & { seconds: number }> {
  const t = tally();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: s.concurrency }, async (_, loop) => {
      let i = 0;
      while (performance.now() < deadline) {
        const org = orgs[pinned ? loop % orgs.length : (loop + i++ * s.concurrency) % orgs.length]!;
        const t0 = performance.now();
        const refusal = await one(org, loop).catch((err: Error & { response?: string }) => (err.response ?? err.message).slice(0, 40));
        if (refusal === undefined) {
          t.ok++;
          t.latencies.push(performance.now() - t0);
        } else refuse(t, refusal);
      }
    }),
  );
  return { ...t, seconds: (performance.now() - started) / 1000 };
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

async function main() {
  const s = parseFlags(process.argv.slice(2));
  // TRUST_PROXY: the API believes X-Forwarded-For from 127.0.0.1, where both the SMTP front
  // and the ceiling's POSTs (each with a client IP of its own) come from.
  const stack: Stack = await startStack({ env: { TRUST_PROXY: "127.0.0.1" } });
  let smtp: ReturnType<typeof runBun> | undefined;
  const stop = async () => {
    await smtp?.stop("SIGKILL");
    await stack.stop();
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => void stop().then(() => process.exit(130)));
  try {
    const orgs: Org[] = [];
    for (let i = 0; i < s.orgs; i++) orgs.push({ slug: `bench${i}`, token: await stack.org(`bench${i}`, "enterprise") });
    const port = await freePort();
    smtp = runBun("cmd/smtp/index.ts", [], { DATA_DIR: stack.dataDir, LIMITER_URL: stack.limiterUrl, API_URL: stack.apiUrls[0]!, SMTP_PORT: String(port), SMTP_MAX_CLIENTS: String(s.concurrency * 2 + 10) });
    await waitFor("the smtp front", async () => smtp!.stderr().includes("info smtp listening"), 15_000);
    const api = stack.apiUrls[0]!;

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
      if (!tr) pools.set(loop, (tr = smtpTransport(port, org, true, loop)));
      const info = await tr.sendMail(message(org));
      return info.response.startsWith("250") ? undefined : info.response.slice(0, 40);
    };

    console.log(`smtp-bench: ${s.concurrency} concurrent clients, ${s.duration} s per run (warm-up ${s.warmup} s), ${s.orgs} enterprise organizations, embedded store`);
    await closedLoop({ ...s }, orgs, s.warmup, viaSession);
    const rows: [string, Awaited<ReturnType<typeof closedLoop>>][] = [];
    rows.push(["SMTP, one message per session", await closedLoop(s, orgs, s.duration, viaSession)]);
    rows.push(["SMTP, pooled sessions", await closedLoop(s, orgs, s.duration, viaPool, true)]);
    for (const tr of pools.values()) tr.close();
    rows.push(["ceiling: direct POST /api/v1/emails", await closedLoop(s, orgs, s.duration, viaPost)]);
    console.log("\nthroughput (messages accepted per second; refusals by reason)");
    for (const [name, r] of rows) {
      const lat = r.latencies.sort((a, b) => a - b);
      const refused = [...r.refused].map(([k, v]) => `${v}x ${k}`).join("; ") || "none";
      console.log(`  ${name.padEnd(38)} ${(r.ok / r.seconds).toFixed(1).padStart(7)}/s  (${r.ok} in ${r.seconds.toFixed(1)} s; p50 ${ms(pct(lat, 50))}, p99 ${ms(pct(lat, 99))}; refused: ${refused})`);
    }

    // Latency, one at a time, interleaved so that both see the same machine.
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
    greetLat.sort((a, b) => a - b);
    smtpLat.sort((a, b) => a - b);
    postLat.sort((a, b) => a - b);
    console.log(`\nlatency, ${s.samples} messages one at a time (SMTP: a new session each, connect to 250)`);
    console.log(`  ${"".padEnd(26)} ${"p50".padStart(9)} ${"p99".padStart(9)}`);
    console.log(`  ${"SMTP session".padEnd(26)} ${ms(pct(smtpLat, 50)).padStart(9)} ${ms(pct(smtpLat, 99)).padStart(9)}`);
    console.log(`  ${"direct POST".padEnd(26)} ${ms(pct(postLat, 50)).padStart(9)} ${ms(pct(postLat, 99)).padStart(9)}`);
    console.log(`  ${"of which: connect to 220".padEnd(26)} ${ms(pct(greetLat, 50)).padStart(9)} ${ms(pct(greetLat, 99)).padStart(9)}`);
    console.log(`  ${"added by SMTP".padEnd(26)} ${ms(pct(smtpLat, 50) - pct(postLat, 50)).padStart(9)} ${ms(pct(smtpLat, 99) - pct(postLat, 99)).padStart(9)}`);
  } finally {
    await stop();
  }
}

await main();
process.exit(0);
