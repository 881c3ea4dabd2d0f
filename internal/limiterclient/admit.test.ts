// The front's AdmitBatch client against the daemon's server code on a real port: answers,
// gRPC errors, deadlines, and a daemon that is not there.
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type RpcServer, serveRpc } from "../daemon/server";
import { clientCredential, ensurePlaneSecret } from "../plane/secret";
import { freePort, tempDir } from "../testkit/testkit";
import { ADMIT_BATCH_PATH, type Admission, decodeAdmitBatchRequest, encodeAdmitBatchResponse } from "../wire/admit";
import { type AdmitBatchCaller, admitBatchCaller } from "./admit";

// The daemon's side is switched per test: how it answers the batch it decoded.
let answer: (calls: ReturnType<typeof decodeAdmitBatchRequest>) => Promise<Admission[]>;
let server: RpcServer;
let caller: AdmitBatchCaller;

const admission = (remaining: number): Admission => ({
  verdict: Verdict.ALLOWED,
  orgId: "org_1",
  orgSlug: "acme",
  plan: Plan.PREMIUM,
  limit: 700,
  remaining,
  resetSeconds: 1,
  retryAfterSeconds: 0,
  tags: [{ name: "vip", subscribers: 2 }],
  ticket: "org_1.1700000120.AAAAAAAAAAAAAAAAAAAAAA",
});

// The daemon's port takes calls with the plane secret of this directory only.
const dataDir = tempDir();
const credential = clientCredential(undefined, dataDir);
const secret = { value: ensurePlaneSecret(dataDir), refused: () => {} };

beforeAll(async () => {
  server = await serveRpc(() => {}, "127.0.0.1", 0, {
    raw: {
      [ADMIT_BATCH_PATH]: async (req) => encodeAdmitBatchResponse(await answer(decodeAdmitBatchRequest(req))),
    },
    secret,
  });
  caller = admitBatchCaller(`http://127.0.0.1:${server.port}`, credential);
});
afterAll(async () => {
  caller.close();
  await server.close();
});

test("sends the calls and answers the admissions, in order", async () => {
  answer = async (calls) =>
    calls.map((c, i) => ({ ...admission(699 - i), orgSlug: `${c.token}@${c.clientIp}${c.withTags ? "+tags" : ""}` }));
  const out = await caller(
    [
      { token: "a", clientIp: "192.0.2.1", withTags: true },
      { token: "b", clientIp: "2001:db8::1", withTags: false },
    ],
    1_000,
  );
  expect(out.map((a) => [a.orgSlug, a.remaining])).toEqual([
    ["a@192.0.2.1+tags", 699],
    ["b@2001:db8::1", 698],
  ]);
  expect(out[0]!.tags).toEqual([{ name: "vip", subscribers: 2 }]);
  expect(out[0]!.ticket).toBe(admission(0).ticket);
});

test("a call without the plane secret, or with another one, is refused before it is read", async () => {
  let asked = 0;
  answer = async (calls) => {
    asked++;
    return calls.map(() => admission(1));
  };
  const other = tempDir();
  ensurePlaneSecret(other);
  const stranger = admitBatchCaller(`http://127.0.0.1:${server.port}`, clientCredential(undefined, other));
  const refused = await stranger([{ token: "", clientIp: "192.0.2.1", withTags: false }], 1_000).catch((e) => e);
  stranger.close();
  expect([refused.code, refused.rawMessage]).toEqual([
    Code.Unauthenticated,
    "this port takes calls with the plane secret only (DATA_DIR/plane.secret, sent as a bearer token)",
  ]);
  // A secret file that is not there yet fails the call, and opens no stream.
  const early = admitBatchCaller(`http://127.0.0.1:${server.port}`, clientCredential(undefined, tempDir()));
  const missing = await early([{ token: "", clientIp: "192.0.2.1", withTags: false }], 1_000).catch((e) => e);
  early.close();
  expect(missing.code).toBe(Code.Unavailable);
  expect(missing.rawMessage).toContain("plane.secret is not there yet");
  expect(asked).toBe(0);
});

test("a gRPC error from the daemon rejects with its code and message", async () => {
  answer = async () => {
    throw new ConnectError("client_ip is not an IP address", Code.InvalidArgument);
  };
  const err = await caller([{ token: "", clientIp: "x", withTags: false }], 1_000).catch((e) => e);
  expect(err).toBeInstanceOf(ConnectError);
  expect([err.code, err.rawMessage]).toEqual([Code.InvalidArgument, "client_ip is not an IP address"]);
});

test("an answer with the wrong number of admissions rejects", async () => {
  answer = async () => [admission(1), admission(0)];
  const err = await caller([{ token: "", clientIp: "192.0.2.1", withTags: false }], 1_000).catch((e) => e);
  expect(err.code).toBe(Code.Internal);
});

test("no answer within the deadline rejects with DEADLINE_EXCEEDED, on time", async () => {
  answer = () => new Promise(() => {});
  const t0 = performance.now();
  const err = await caller([{ token: "", clientIp: "192.0.2.1", withTags: false }], 100).catch((e) => e);
  expect(err.code).toBe(Code.DeadlineExceeded);
  expect(performance.now() - t0).toBeLessThan(1_000);
  // Nothing was read since the call began: the connection is given up, and the next call opens another.
  answer = async (calls) => calls.map(() => admission(3));
  expect((await caller([{ token: "", clientIp: "192.0.2.1", withTags: false }], 1_000))[0]!.remaining).toBe(3);
});

test("a daemon that is not there rejects at once, and the session recovers when it is", async () => {
  const port = await freePort();
  const missing = admitBatchCaller(`http://127.0.0.1:${port}`, credential);
  const err = await missing([{ token: "", clientIp: "192.0.2.1", withTags: false }], 1_000).catch((e) => e);
  expect(err).toBeInstanceOf(ConnectError);
  expect(err.code).not.toBe(Code.DeadlineExceeded);
  const late = await serveRpc(() => {}, "127.0.0.1", port, {
    raw: {
      [ADMIT_BATCH_PATH]: async (req) => encodeAdmitBatchResponse(decodeAdmitBatchRequest(req).map(() => admission(5))),
    },
    secret,
  });
  try {
    expect((await missing([{ token: "", clientIp: "192.0.2.1", withTags: false }], 1_000))[0]!.remaining).toBe(5);
  } finally {
    missing.close();
    await late.close();
  }
});
