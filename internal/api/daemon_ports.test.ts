// The API's mail port over SendBatch: sends coalesced, each answer its own, and a send that
// waited past its deadline in the API never sent.
import { create } from "@bufbuild/protobuf";
import { Code, type ConnectError } from "@connectrpc/connect";
import { expect, test } from "bun:test";
import { EmailSchema, Lane, SendOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import { type SendResult, SendResultSchema } from "../gen/mailcore/limiter/v1/send_batch_pb";
import type { SendBatch } from "../limiterclient/send_batch";
import { captureLogger } from "../testkit/logcapture";
import { mailPort } from "./daemon_ports";
import { NotQueued } from "./ports";

const send = (to: string) => ({
  lane: Lane.TRANSACTIONAL,
  email: create(EmailSchema, { toAddress: to }),
  idempotencyKey: "",
  bodyHash: "",
});

/** A port whose daemon answers each batch it is sent with `answer`. */
function portWith(answer: (b: SendBatch) => SendResult[] | Promise<SendResult[]>, timeoutMs = 1_000) {
  const batches: SendBatch[] = [];
  const sendBatch = Object.assign(
    async (b: SendBatch) => {
      batches.push(b);
      return answer(b);
    },
    { close: () => {} },
  );
  const port = mailPort({ sendBatch, mail: {} as never }, timeoutMs, captureLogger().log);
  return { port, batches };
}

test("the sends of one turn go as one batch, each with its request id, each answered on its own", async () => {
  const { port, batches } = portWith((b) =>
    b.sends.map((s) =>
      s.send!.email!.toAddress!.startsWith("late")
        ? create(SendResultSchema, { errorCode: Code.DeadlineExceeded, errorMessage: "late", notQueued: true })
        : s.send!.email!.toAddress!.startsWith("lost")
          ? create(SendResultSchema, { errorCode: Code.Unavailable, errorMessage: "store unavailable" })
          : create(SendResultSchema, {
              response: { outcome: SendOutcome.ACCEPTED, messageId: `m-${s.ticket} ${s.send!.email!.requestId}` },
            }),
    ),
  );
  const [a, late, lost] = await Promise.allSettled([
    port.send("ticket-1", send("a@x.example"), "r1"),
    port.send("ticket-2", send("late@x.example"), "r2"),
    port.send("ticket-3", send("lost@x.example"), "r3"),
  ]);
  expect(batches.length).toBe(1);
  expect((a as PromiseFulfilledResult<{ messageId: string }>).value.messageId).toBe("m-ticket-1 r1");
  expect((late as PromiseRejectedResult).reason).toBeInstanceOf(NotQueued);
  const reason = (lost as PromiseRejectedResult).reason;
  expect(reason).not.toBeInstanceOf(NotQueued);
  expect((reason as ConnectError).code).toBe(Code.Unavailable);
});

test("a send whose deadline passes while it waits for a batch is not sent, and not queued", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  // The daemon holds the batches it gets: once the API's calls in flight are all under way, the
  // sends after them wait in the API, until after their deadline (50 ms).
  const { port, batches } = portWith(async (b) => {
    await held;
    return b.sends.map(() => create(SendResultSchema, { response: { outcome: SendOutcome.ACCEPTED } }));
  }, 50);
  const tos = ["a@x.example", "b@x.example", "c@x.example"];
  const answers: Promise<unknown>[] = [];
  for (const [i, to] of tos.entries()) {
    answers.push(port.send(`ticket-${i}`, send(to), `r${i}`).catch((e: unknown) => e));
    await Bun.sleep(0);
  }
  await Bun.sleep(100);
  release();
  const outcomes = await Promise.all(answers);
  const sent = new Set(batches.flatMap((b) => b.sends.map((s) => s.send!.email!.toAddress)));
  expect(sent.size).toBeLessThan(tos.length);
  for (const [i, to] of tos.entries())
    if (sent.has(to)) expect(outcomes[i]).not.toBeInstanceOf(Error);
    else expect(outcomes[i]).toBeInstanceOf(NotQueued);
});
