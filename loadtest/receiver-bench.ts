// What the benches against one fast SMTP receiver share (mx-bench, transport-bench): their
// flags, the receiver in a child process of its own (so its CPU is not counted as ours), a
// shaping that never holds back, the measured loop, and the table they print.
import { spawn } from "bun";
import { parseShaping, type Shaping } from "../internal/mx/shaping";
import { waitFor } from "../internal/testkit/testkit";

/** Parses `--name N` pairs over defaults: each a positive integer up to 100,000. */
export function parseCountFlags<S extends Record<string, number>>(argv: string[], defaults: S, usage: string): S {
  const s = { ...defaults };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "") as keyof S;
    const value = Number(argv[i + 1]);
    if (!(name in s) || !Number.isInteger(value) || value <= 0 || value > 100_000) throw new Error(`usage: ${usage}`);
    s[name] = value as S[keyof S];
  }
  return s;
}

/** Runs this script again as `<script> --receiver <port>` and waits for its "ready" line; returns what stops it. */
export async function startReceiverProcess(script: string, port: number): Promise<() => Promise<void>> {
  const receiver = spawn([process.execPath, script, "--receiver", String(port)], { stdout: "pipe", stderr: "inherit" });
  const out = receiver.stdout.getReader();
  await waitFor("the receiver", async () => new TextDecoder().decode((await out.read()).value).includes("ready"));
  return async () => {
    receiver.kill();
    await receiver.exited;
  };
}

/** A shaping whose default never holds a bench back: `connections` at once, 100 messages each. */
export function benchShaping(connections: number): Shaping {
  return parseShaping(
    {
      default: { connections, messagesPerConnection: 100, messagesPerMinute: 1_000_000, tlsRequired: false },
      rules: [],
      rateLimitReplies: [],
      slowdown: { minutes: 1, connections: 1, messagesPerMinute: 1 },
    },
    "bench",
  );
}

export interface Run {
  messages: number;
  seconds: number;
  cpuMsPerMessage: number;
}

/**
 * Sends messages 0..count-1 over `inFlight` lanes, one message at a time each, a lane's sender
 * made by `lane` (where a lane keeps a state of its own, a session say); the time taken and
 * this process's CPU per message.
 */
export async function measureSends(
  count: number,
  inFlight: number,
  lane: () => (n: number) => Promise<void>,
): Promise<Run> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      const send = lane();
      while (next < count) await send(next++);
    }),
  );
  const seconds = (performance.now() - t0) / 1_000;
  const cpu = process.cpuUsage(cpu0);
  return { messages: count, seconds, cpuMsPerMessage: (cpu.user + cpu.system) / 1_000 / count };
}

export function printRuns(runs: { name: string; run: Run }[]): void {
  console.log("| run | messages/s | CPU ms per delivery (this process) |\n|---|---|---|");
  for (const { name, run } of runs)
    console.log(`| ${name} | ${(run.messages / run.seconds).toFixed(0)} | ${run.cpuMsPerMessage.toFixed(3)} |`);
}
