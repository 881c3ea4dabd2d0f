// MX delivery's benchmark: bun run loadtest/mx-bench.ts [--messages N] [--inFlight N] [--connections N]
// Everything runs on this machine: a fast receiver (smtp-server with STARTTLS, in a child
// process of its own so its CPU is not counted as ours) on 127.0.0.2, and in this process
// MxDelivery with `inFlight` messages under way at once over at most `connections` connections.
// Reported: messages a second, and this process's CPU per delivery (user + system), against
// the ceiling measured in the same run: the same messages sent straight over MxSession, one
// session per connection and no queue, shaping or results.
import { spawn } from "bun";
import { cpus } from "node:os";
import { MxDelivery } from "../internal/mx/delivery";
import { MxSession } from "../internal/mx/session";
import { parseShaping } from "../internal/mx/shaping";
import { startMxReceiver, testCa } from "../internal/testkit/mxreceivers";
import { freePort, waitFor } from "../internal/testkit/testkit";

const ADDRESS = "127.0.0.2";
const DEFAULTS = { messages: 3_000, inFlight: 64, connections: 10, warmup: 300 };
type Settings = typeof DEFAULTS;

function parseFlags(argv: string[]): Settings {
  const s = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "") as keyof Settings;
    const value = Number(argv[i + 1]);
    if (!(name in s) || !Number.isInteger(value) || value <= 0 || value > 100_000)
      throw new Error(`usage: mx-bench.ts [--messages N] [--inFlight N] [--connections N] [--warmup N]`);
    s[name] = value;
  }
  return s;
}

/** A message of about 3 KB, as a transactional message with its DKIM signature is. */
function message(n: number): Buffer {
  const body = `${"Your one-time code is 123456. It expires in ten minutes. ".repeat(40)}\r\n`;
  return Buffer.from(
    `DKIM-Signature: v=1; a=rsa-sha256; d=sender.test; s=s1; h=from:to:subject; bh=${"x".repeat(44)}; b=${"y".repeat(344)}\r\n` +
      `From: a@sender.test\r\nTo: u${n}@rcpt.test\r\nSubject: code ${n}\r\nMessage-ID: <${n}@sender.test>\r\n\r\n${body}`,
  );
}

interface Run {
  messages: number;
  seconds: number;
  cpuMsPerMessage: number;
}

async function measure(messages: number, inFlight: number, send: (n: number) => Promise<void>): Promise<Run> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < messages) await send(next++);
    }),
  );
  const seconds = (performance.now() - t0) / 1_000;
  const cpu = process.cpuUsage(cpu0);
  return { messages, seconds, cpuMsPerMessage: (cpu.user + cpu.system) / 1_000 / messages };
}

async function runReceiver(port: number): Promise<void> {
  const ca = await testCa();
  const r = await startMxReceiver({ address: ADDRESS, port, tls: await ca.issue(["mx.bench.test"]) });
  setInterval(() => r.received.splice(0), 1_000); // keeps no messages: only the protocol's cost stays
  console.log("ready");
}

async function main(): Promise<void> {
  const s = parseFlags(process.argv.slice(2));
  const port = await freePort();
  const receiver = spawn([process.execPath, import.meta.path, "--receiver", String(port)], {
    stdout: "pipe",
    stderr: "inherit",
  });
  try {
    const out = receiver.stdout.getReader();
    await waitFor("the receiver", async () => new TextDecoder().decode((await out.read()).value).includes("ready"));
    const shaping = parseShaping(
      {
        default: {
          connections: s.connections,
          messagesPerConnection: 100,
          messagesPerMinute: 1_000_000,
          tlsRequired: false,
        },
        rules: [],
        rateLimitReplies: [],
        slowdown: { minutes: 1, connections: 1, messagesPerMinute: 1 },
      },
      "bench",
    );
    const delivery = new MxDelivery({
      resolveRoute: async () => ({ hosts: [{ name: "mx.bench.test", addresses: [ADDRESS] }] }),
      lookupMtaSts: async () => undefined,
      shaping,
      heloName: "bench.mailcore.test",
      port,
    });
    const viaDelivery = async (n: number) => {
      const r = await delivery.deliver({ returnPath: "rp@sender.test", recipient: `u${n}@rcpt.test`, raw: message(n) });
      if (r.verdict !== "delivered") throw new Error(`not delivered: ${r.detail}`);
    };
    // The ceiling: `connections` sessions, each sending its share one message after another (RSET between).
    const sessions: MxSession[] = [];
    const bare = async (messages: number) => {
      let next = 0;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: s.connections }, async () => {
          let session: MxSession | undefined;
          while (next < messages) {
            const n = next++;
            if (!session || session.messages >= 100) {
              session?.quit();
              session = await MxSession.open({
                host: "mx.bench.test",
                address: ADDRESS,
                port,
                heloName: "bench.mailcore.test",
                tls: "opportunistic",
                timeouts: { setupMs: 30_000, replyMs: 60_000, messageMs: 300_000 },
              });
              sessions.push(session);
            } else await session.reset();
            await session.send("rp@sender.test", `u${n}@rcpt.test`, message(n));
          }
          session?.quit();
        }),
      );
      const seconds = (performance.now() - t0) / 1_000;
      const cpu = process.cpuUsage(cpu0);
      return { messages, seconds, cpuMsPerMessage: (cpu.user + cpu.system) / 1_000 / messages };
    };
    await measure(s.warmup, s.inFlight, viaDelivery);
    await bare(s.warmup);
    const runs: { name: string; run: Run }[] = [];
    for (let pair = 0; pair < 2; pair++) {
      runs.push({ name: "MxDelivery", run: await measure(s.messages, s.inFlight, viaDelivery) });
      runs.push({ name: "bare MxSession (ceiling)", run: await bare(s.messages) });
    }
    delivery.close();
    console.log(
      `MX delivery to one fast receiver (smtp-server, STARTTLS, own process) on ${ADDRESS}; ${s.messages} messages of ${message(0).length} bytes; ` +
        `${s.inFlight} in flight, ${s.connections} connections, 100 messages a connection; ${cpus().length} cores (${cpus()[0]?.model}); Bun ${Bun.version}`,
    );
    console.log("| run | messages/s | CPU ms per delivery (this process) |\n|---|---|---|");
    for (const { name, run } of runs)
      console.log(`| ${name} | ${(run.messages / run.seconds).toFixed(0)} | ${run.cpuMsPerMessage.toFixed(3)} |`);
  } finally {
    receiver.kill();
    await receiver.exited;
  }
}

if (process.argv[2] === "--receiver") await runReceiver(Number(process.argv[3]));
else await main();
