// MX delivery's benchmark: bun run loadtest/mx-bench.ts [--messages N] [--inFlight N] [--connections N]
// Everything runs on this machine: a fast receiver (smtp-server with STARTTLS, in a child
// process of its own so its CPU is not counted as ours) on 127.0.0.2, and in this process
// MxDelivery with `inFlight` messages under way at once over at most `connections` connections.
// Reported: messages a second, and this process's CPU per delivery (user + system), against
// the ceiling measured in the same run: the same messages sent straight over MxSession, one
// session per connection and no queue, shaping or results.
import { cpus } from "node:os";
import { MxDelivery } from "../internal/mx/delivery";
import { MxSession } from "../internal/mx/session";
import { startMxReceiver, testCa } from "../internal/testkit/mxreceivers";
import { freePort } from "../internal/testkit/testkit";
import {
  benchShaping,
  measureSends,
  parseCountFlags,
  printRuns,
  type Run,
  startReceiverProcess,
} from "./receiver-bench";

const ADDRESS = "127.0.0.2";
const DEFAULTS = { messages: 3_000, inFlight: 64, connections: 10, warmup: 300 };
const USAGE = "mx-bench.ts [--messages N] [--inFlight N] [--connections N] [--warmup N]";

/** A message of about 3 KB, as a transactional message with its DKIM signature is. */
function message(n: number): Buffer {
  const body = `${"Your one-time code is 123456. It expires in ten minutes. ".repeat(40)}\r\n`;
  return Buffer.from(
    `DKIM-Signature: v=1; a=rsa-sha256; d=sender.test; s=s1; h=from:to:subject; bh=${"x".repeat(44)}; b=${"y".repeat(344)}\r\n` +
      `From: a@sender.test\r\nTo: u${n}@rcpt.test\r\nSubject: code ${n}\r\nMessage-ID: <${n}@sender.test>\r\n\r\n${body}`,
  );
}

async function runReceiver(port: number): Promise<void> {
  const ca = await testCa();
  const r = await startMxReceiver({ address: ADDRESS, port, tls: await ca.issue(["mx.bench.test"]) });
  setInterval(() => r.received.splice(0), 1_000); // keeps no messages: only the protocol's cost stays
  console.log("ready");
}

async function main(): Promise<void> {
  const s = parseCountFlags(process.argv.slice(2), DEFAULTS, USAGE);
  const port = await freePort();
  const stopReceiver = await startReceiverProcess(import.meta.path, port);
  try {
    const delivery = new MxDelivery({
      resolveRoute: async () => ({ hosts: [{ name: "mx.bench.test", addresses: [ADDRESS] }] }),
      lookupMtaSts: async () => undefined,
      shaping: benchShaping(s.connections),
      heloName: "bench.mailcore.test",
      port,
    });
    const viaDelivery = () => async (n: number) => {
      const r = await delivery.deliver({ returnPath: "rp@sender.test", recipient: `u${n}@rcpt.test`, raw: message(n) });
      if (r.verdict !== "delivered") throw new Error(`not delivered: ${r.detail}`);
    };
    // The ceiling: `connections` sessions, each sending its share one message after another (RSET between).
    const sessions: MxSession[] = [];
    const bareSession = () => {
      let session: MxSession | undefined;
      return async (n: number) => {
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
      };
    };
    const bare = async (messages: number) => {
      const run = await measureSends(messages, s.connections, bareSession);
      for (const session of sessions.splice(0)) session.quit();
      return run;
    };
    await measureSends(s.warmup, s.inFlight, viaDelivery);
    await bare(s.warmup);
    const runs: { name: string; run: Run }[] = [];
    for (let pair = 0; pair < 2; pair++) {
      runs.push({ name: "MxDelivery", run: await measureSends(s.messages, s.inFlight, viaDelivery) });
      runs.push({ name: "bare MxSession (ceiling)", run: await bare(s.messages) });
    }
    delivery.close();
    console.log(
      `MX delivery to one fast receiver (smtp-server, STARTTLS, own process) on ${ADDRESS}; ${s.messages} messages of ${message(0).length} bytes; ` +
        `${s.inFlight} in flight, ${s.connections} connections, 100 messages a connection; ${cpus().length} cores (${cpus()[0]?.model}); Bun ${Bun.version}`,
    );
    printRuns(runs);
  } finally {
    await stopReceiver();
  }
}

if (process.argv[2] === "--receiver") await runReceiver(Number(process.argv[3]));
else await main();
