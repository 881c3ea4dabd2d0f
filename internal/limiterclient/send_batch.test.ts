// The front's SendBatch client against the daemon's server code on a real port.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type RpcServer, serveRpc } from "../daemon/server";
import { EmailSchema, Lane, SendOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import {
  type SendBatchRequest,
  SendBatchRequestSchema,
  SendBatchResponseSchema,
  SendResultSchema,
} from "../gen/mailcore/limiter/v1/send_batch_pb";
import { clientCredential, ensurePlaneSecret } from "../plane/secret";
import { tempDir } from "../testkit/testkit";
import { SEND_BATCH_PATH } from "../wire/send_batch";
import { type SendBatchCaller, sendBatchCaller } from "./send_batch";

let answer: (req: SendBatchRequest) => ReturnType<typeof create<typeof SendResultSchema>>[];
let server: RpcServer;
let caller: SendBatchCaller;

// The daemon's port takes calls with the plane secret of this directory only.
const dataDir = tempDir();
const secret = { value: ensurePlaneSecret(dataDir), refused: () => {} };

beforeAll(async () => {
  server = await serveRpc(() => {}, "127.0.0.1", 0, {
    secret,
    raw: {
      [SEND_BATCH_PATH]: async (req) =>
        toBinary(
          SendBatchResponseSchema,
          create(SendBatchResponseSchema, { results: answer(fromBinary(SendBatchRequestSchema, req)) }),
        ),
    },
  });
  caller = sendBatchCaller(`http://127.0.0.1:${server.port}`, clientCredential(undefined, dataDir));
});
afterAll(async () => {
  caller.close();
  await server.close();
});

const send = (to: string) => ({
  ticket: `ticket-${to}`,
  send: { lane: Lane.TRANSACTIONAL, email: create(EmailSchema, { toAddress: to, requestId: `req-${to}` }) },
});

test("sends the batch with its deadline and each send's ticket, and answers each send, in order", async () => {
  answer = (req) =>
    req.sends.map((s) =>
      create(SendResultSchema, {
        response: {
          outcome: SendOutcome.ACCEPTED,
          messageId: `${s.ticket} ${s.send!.email!.requestId}@${req.deadlineMs}`,
        },
      }),
    );
  const out = await caller({ sends: [send("a@x.example"), send("b@x.example")], deadlineMs: 42 }, 1_000);
  expect(out.map((r) => r.response?.messageId)).toEqual([
    "ticket-a@x.example req-a@x.example@42",
    "ticket-b@x.example req-b@x.example@42",
  ]);
});

test("an answer with the wrong number of results rejects", async () => {
  answer = () => [];
  const err = await caller({ sends: [send("a@x.example")], deadlineMs: 42 }, 1_000).catch((e) => e);
  expect(err.code).toBe(Code.Internal);
});
