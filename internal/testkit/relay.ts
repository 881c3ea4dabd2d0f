// A real SMTP relay for tests (smtp-server), whose answers depend on the recipient:
//   bounce*@  -> 550 at RCPT         flaky*@ -> 451 at the first DATA, then 250
//   busy*@    -> 451 at every DATA   hang*@  -> never answers DATA
//   hold*@    -> answers DATA with 250 when the test calls releaseHeld()
//   anything else -> 250
import { SMTPServer } from "smtp-server";
import { freePort } from "./testkit";

export interface Relay {
  url: string;
  /** Messages accepted, raw, with their envelope recipient. */
  received: { rcpt: string; raw: string }[];
  /** hold*@ messages whose DATA waits for releaseHeld(). */
  held(): number;
  releaseHeld(): void;
  stop(): Promise<void>;
}

const reply = (code: number, text: string) => Object.assign(new Error(text), { responseCode: code });

export async function startRelay(): Promise<Relay> {
  const port = await freePort();
  const received: Relay["received"] = [];
  const attempts = new Map<string, number>();
  const holding: (() => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(address, _session, done) {
      if (address.address.startsWith("bounce")) return done(reply(550, "5.1.1 No such user here"));
      done();
    },
    onData(stream, session, done) {
      const rcpt = session.envelope.rcptTo[0]!.address;
      let raw = "";
      stream.on("data", (chunk: Buffer) => {
        raw += chunk.toString("utf8");
      });
      stream.on("end", () => {
        const n = (attempts.get(rcpt) ?? 0) + 1;
        attempts.set(rcpt, n);
        if (rcpt.startsWith("hang")) return; // the worker's lease is held until it dies or times out
        if (rcpt.startsWith("hold")) {
          holding.push(() => {
            received.push({ rcpt, raw });
            done();
          });
          return;
        }
        if (rcpt.startsWith("busy") || (rcpt.startsWith("flaky") && n === 1))
          return done(reply(451, "4.3.0 Try again later"));
        received.push({ rcpt, raw });
        done();
      });
    },
  });
  await new Promise<void>((ok) => server.listen(port, "127.0.0.1", ok));
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    held: () => holding.length,
    releaseHeld: () => {
      for (const release of holding.splice(0)) release();
    },
    stop: () => Promise.race([new Promise<void>((ok) => server.close(() => ok())), Bun.sleep(1_000)]),
  };
}
