// The worker's transports against each other: bun run loadtest/transport-bench.ts [--messages N] [--inFlight N]
// A fast receiver (smtp-server, plaintext, in a child process of its own so its CPU is not
// counted as ours) on 127.0.0.2, and in this process the worker's path of a leased message
// without the daemon: compose (nodemailer, as the worker does), optionally DKIM-sign
// (internal/dkim, RSA-2048, as the worker will), and send through the MX transport (MxTransport
// over MxDelivery: 10 connections, 100 messages a connection) or the relay transport (SmtpRelay:
// nodemailer's pool of 4 connections). Reported: messages a second with `inFlight` under way,
// and this process's CPU per delivery (user + system), the composing and signing included.
import { create } from "@bufbuild/protobuf";
import { cpus } from "node:os";
import { generateDkimKey } from "../internal/dkim/keys";
import { type DkimSigningKey, signMessage } from "../internal/dkim/sign";
import { DeliveryOutcome, EmailSchema, LeaseResponseSchema } from "../internal/gen/mailcore/limiter/v1/mail_pb";
import { MxDelivery } from "../internal/mx/delivery";
import { MxTransport } from "../internal/worker/mx_transport";
import { startMxReceiver } from "../internal/testkit/mxreceivers";
import { freePort } from "../internal/testkit/testkit";
import { composer, type Prepared, SmtpRelay, type Transport } from "../internal/worker/transport";
import {
  benchShaping,
  measureSends,
  parseCountFlags,
  printRuns,
  type Run,
  startReceiverProcess,
} from "./receiver-bench";

const ADDRESS = "127.0.0.2";
const DEFAULTS = { messages: 3_000, inFlight: 64, warmup: 300 };
const USAGE = "transport-bench.ts [--messages N] [--inFlight N] [--warmup N]";

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

/** The worker's path of a leased message: prepare (compose), optionally sign, send. */
function viaTransport(transport: Transport, sign: ((p: Prepared) => Prepared) | undefined) {
  return () => async (n: number) => {
    const prepared = await transport.prepare(lease(n));
    const r = await transport.send(sign ? sign(prepared) : prepared);
    if (r.outcome !== DeliveryOutcome.DELIVERED) throw new Error(`not delivered: ${r.detail}`);
  };
}

async function runReceiver(port: number): Promise<void> {
  const r = await startMxReceiver({ address: ADDRESS, port, tls: false });
  setInterval(() => r.received.splice(0), 1_000); // keeps no messages: only the protocol's cost stays
  console.log("ready");
}

async function main(): Promise<void> {
  const s = parseCountFlags(process.argv.slice(2), DEFAULTS, USAGE);
  const port = await freePort();
  const stopReceiver = await startReceiverProcess(import.meta.path, port);
  try {
    const mx = new MxTransport(
      new MxDelivery({
        resolveRoute: async () => ({ hosts: [{ name: "mx.rcpt.test", addresses: [ADDRESS] }] }),
        lookupMtaSts: async () => undefined,
        shaping: benchShaping(10),
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
    for (const [, transport, signer] of variants)
      await measureSends(s.warmup, s.inFlight, viaTransport(transport, signer));
    const runs: { name: string; run: Run }[] = [];
    for (let round = 0; round < 2; round++)
      for (const [name, transport, signer] of variants)
        runs.push({ name, run: await measureSends(s.messages, s.inFlight, viaTransport(transport, signer)) });
    mx.close();
    relay.close();
    console.log(
      `The worker's transports to one fast receiver (smtp-server, plaintext, own process) on ${ADDRESS}; ${s.messages} messages composed as the worker does; ` +
        `${s.inFlight} in flight; MX: 10 connections, 100 messages a connection; relay: nodemailer's pool of 4; ${cpus().length} cores (${cpus()[0]?.model}); Bun ${Bun.version}`,
    );
    printRuns(runs);
  } finally {
    await stopReceiver();
  }
}

if (process.argv[2] === "--receiver") await runReceiver(Number(process.argv[3]));
else await main();
