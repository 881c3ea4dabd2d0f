// The worker's transports against each other: bun run loadtest/transport-bench.ts [--messages N] [--inFlight N]
// A fast receiver (smtp-server, plaintext, in a child process of its own so its CPU is not
// counted as ours) on 127.0.0.2, and in this process the worker's path of a leased message
// without the daemon: compose (nodemailer, as the worker does), optionally DKIM-sign
// (internal/dkim, RSA-2048, as the worker will), and send through the MX transport (MxTransport
// over MxDelivery: 10 connections, 100 messages a connection) or the relay transport (SmtpRelay:
// nodemailer's pool of 4 connections). Reported: messages a second with `inFlight` under way,
// and this process's CPU per delivery (user + system), the composing and signing included.
import { spawn } from "bun";
import { create } from "@bufbuild/protobuf";
import { cpus } from "node:os";
import { generateDkimKey } from "../internal/dkim/keys";
import { type DkimSigningKey, signMessage } from "../internal/dkim/sign";
import { DeliveryOutcome, EmailSchema, LeaseResponseSchema } from "../internal/gen/mailcore/limiter/v1/mail_pb";
import { MxDelivery } from "../internal/mx/delivery";
import { parseShaping } from "../internal/mx/shaping";
import { MxTransport } from "../internal/worker/mx_transport";
import { startMxReceiver } from "../internal/testkit/mxreceivers";
import { freePort, waitFor } from "../internal/testkit/testkit";
import { composer, type Prepared, SmtpRelay, type Transport } from "../internal/worker/transport";

const ADDRESS = "127.0.0.2";
const DEFAULTS = { messages: 3_000, inFlight: 64, warmup: 300 };
type Settings = typeof DEFAULTS;

function parseFlags(argv: string[]): Settings {
  const s = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "") as keyof Settings;
    const value = Number(argv[i + 1]);
    if (!(name in s) || !Number.isInteger(value) || value <= 0 || value > 100_000)
      throw new Error("usage: transport-bench.ts [--messages N] [--inFlight N] [--warmup N]");
    s[name] = value;
  }
  return s;
}

/** A leased transactional message, about 2 KB composed. */
function lease(n: number) {
  return create(LeaseResponseSchema, {
    leaseId: `ls_${n}`,
    messageId: `msg_${n.toString(16).padStart(24, "0")}`,
    orgId: "org_bench",
    returnPath: `b-${n}@rp.sender.test`,
    email: create(EmailSchema, {
      from: "Acme <no-reply@sender.test>",
      fromAddress: "no-reply@sender.test",
      to: `u${n}@rcpt.test`,
      toAddress: `u${n}@rcpt.test`,
      subject: `Your code ${n}`,
      text: `${"Your one-time code is 123456. It expires in ten minutes. ".repeat(12)}\n`,
      html: `<p>${"Your one-time code is <b>123456</b>. It expires in ten minutes. ".repeat(12)}</p>`,
    }),
  });
}

interface Run {
  messages: number;
  seconds: number;
  cpuMsPerMessage: number;
}

async function measure(
  messages: number,
  inFlight: number,
  transport: Transport,
  sign: ((p: Prepared) => Prepared) | undefined,
): Promise<Run> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < messages) {
        const prepared = await transport.prepare(lease(next++));
        const r = await transport.send(sign ? sign(prepared) : prepared);
        if (r.outcome !== DeliveryOutcome.DELIVERED) throw new Error(`not delivered: ${r.detail}`);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1_000;
  const cpu = process.cpuUsage(cpu0);
  return { messages, seconds, cpuMsPerMessage: (cpu.user + cpu.system) / 1_000 / messages };
}

async function runReceiver(port: number): Promise<void> {
  const r = await startMxReceiver({ address: ADDRESS, port, tls: false });
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
        default: { connections: 10, messagesPerConnection: 100, messagesPerMinute: 1_000_000, tlsRequired: false },
        rules: [],
        rateLimitReplies: [],
        slowdown: { minutes: 1, connections: 1, messagesPerMinute: 1 },
      },
      "bench",
    );
    const mx = new MxTransport(
      new MxDelivery({
        resolveRoute: async () => ({ hosts: [{ name: "mx.rcpt.test", addresses: [ADDRESS] }] }),
        lookupMtaSts: async () => undefined,
        shaping,
        heloName: "bench.mailcore.test",
        port,
      }),
      composer(),
    );
    const relay = new SmtpRelay(`smtp://${ADDRESS}:${port}`);
    const pair = await generateDkimKey("rsa-sha256");
    const keys: DkimSigningKey[] = [
      { domain: "sender.test", selector: "s1", algorithm: "rsa-sha256", privateKey: pair.privateKey },
    ];
    const sign = (p: Prepared): Prepared => ({ m: p.m, raw: signMessage(p.raw, keys) });
    const variants: [string, Transport, ((p: Prepared) => Prepared) | undefined][] = [
      ["MX transport", mx, undefined],
      ["MX transport, DKIM-signed (RSA-2048)", mx, sign],
      ["relay transport", relay, undefined],
      ["relay transport, DKIM-signed (RSA-2048)", relay, sign],
    ];
    for (const [, transport, signer] of variants) await measure(s.warmup, s.inFlight, transport, signer);
    const runs: { name: string; run: Run }[] = [];
    for (let round = 0; round < 2; round++)
      for (const [name, transport, signer] of variants)
        runs.push({ name, run: await measure(s.messages, s.inFlight, transport, signer) });
    mx.close();
    relay.close();
    console.log(
      `The worker's transports to one fast receiver (smtp-server, plaintext, own process) on ${ADDRESS}; ${s.messages} messages composed as the worker does; ` +
        `${s.inFlight} in flight; MX: 10 connections, 100 messages a connection; relay: nodemailer's pool of 4; ${cpus().length} cores (${cpus()[0]?.model}); Bun ${Bun.version}`,
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
