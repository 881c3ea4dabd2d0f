// The raw gRPC path of the daemon's server: framing, status, trailers, deadlines and errors
// as gRPC clients expect them (@grpc/grpc-js, and plain HTTP/2 where a client would hide
// what the server sent), beside Connect's router on the same port.
import { Code, type ConnectRouter, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect as h2connect, type IncomingHttpHeaders, type IncomingHttpStatusHeader } from "node:http2";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import { envelope } from "../wire/grpc";
import { percentEncode, type RpcServer, serveRpc } from "./server";

const ECHO = "/test.Raw/Echo";
const FAIL = "/test.Raw/Fail";
const HANG = "/test.Raw/Hang";
let server: RpcServer;
let url: string;
let calls = 0;

beforeAll(async () => {
  const routes = (router: ConnectRouter) => {
    router.service(Health, { check: async () => ({ status: HealthCheckResponse_ServingStatus.SERVING }) });
  };
  server = await serveRpc(routes, "127.0.0.1", 0, {
    raw: {
      [ECHO]: async (req) => {
        calls++;
        return Buffer.concat([Buffer.from("echo:"), req]);
      },
      [FAIL]: async () => {
        throw new ConnectError("store unavailable: gone", Code.Unavailable);
      },
      [HANG]: () => new Promise(() => {}),
    },
  });
  url = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.close());

function grpcJs(
  method: string,
  body: Buffer,
  deadlineMs = 2_000,
): Promise<{ err: grpc.ServiceError | null; res?: Buffer }> {
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  return new Promise((done) => {
    client.makeUnaryRequest(
      method,
      (b: Buffer) => b,
      (b: Buffer) => b,
      body,
      { deadline: Date.now() + deadlineMs },
      (err, res) => {
        client.close();
        done({ err, res });
      },
    );
  });
}

/** One request over plain HTTP/2: what the server sent, headers, data and trailers. */
function h2(
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ headers: IncomingHttpHeaders & IncomingHttpStatusHeader; data: Buffer; trailers?: IncomingHttpHeaders }> {
  const session = h2connect(url);
  return new Promise((done, fail) => {
    const s = session.request({ ":method": "POST", ":path": path, te: "trailers", ...headers });
    let head: IncomingHttpHeaders & IncomingHttpStatusHeader = {};
    let trailers: IncomingHttpHeaders | undefined;
    const chunks: Buffer[] = [];
    s.on("response", (h) => (head = h));
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("trailers", (t) => (trailers = t));
    s.on("error", fail);
    s.on("close", () => {
      session.close();
      done({ headers: head, data: Buffer.concat(chunks), trailers });
    });
    s.end(body);
  });
}

describe("a raw unary method", () => {
  test("answers @grpc/grpc-js: the message, then status OK in the trailers", async () => {
    const { err, res } = await grpcJs(ECHO, Buffer.from("hi"));
    expect(err).toBeNull();
    expect(res!.toString()).toBe("echo:hi");
  });

  test("sends headers, one envelope, and grpc-status 0 as a trailer", async () => {
    const r = await h2(
      ECHO,
      { "content-type": "application/grpc+proto", "grpc-timeout": "1S" },
      envelope(Buffer.from("x")),
    );
    expect(r.headers[":status"]).toBe(200);
    expect(r.headers["content-type"]).toBe("application/grpc+proto");
    expect(r.headers["grpc-status"]).toBeUndefined();
    expect(r.data).toEqual(envelope(Buffer.from("echo:x")));
    expect(r.trailers?.["grpc-status"]).toBe("0");
  });

  test("a failure is headers, no message, and the code and percent-encoded message as trailers", async () => {
    const { err } = await grpcJs(FAIL, Buffer.from(""));
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(err?.details).toBe("store unavailable: gone");
    const r = await h2(FAIL, { "content-type": "application/grpc" }, envelope(Buffer.alloc(0)));
    expect(r.trailers?.["grpc-status"]).toBe(String(Code.Unavailable));
    expect(r.trailers?.["grpc-message"]).toBe("store unavailable: gone");
    expect(r.data.length).toBe(0);
  });

  test("grpc-message is percent-encoded as the gRPC spec says, and Connect's clients read it back", () => {
    const message = "100% of é\n";
    expect(percentEncode(message)).toBe("100%25 of %C3%A9%0A");
    expect(decodeURIComponent(percentEncode(message))).toBe(message);
  });

  test("the server keeps the client's deadline (grpc-timeout) even when the client does not", async () => {
    const t0 = performance.now();
    const r = await h2(HANG, { "content-type": "application/grpc", "grpc-timeout": "50m" }, envelope(Buffer.alloc(0)));
    expect(r.trailers?.["grpc-status"]).toBe(String(Code.DeadlineExceeded));
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect((await grpcJs(HANG, Buffer.alloc(0), 100)).err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  });

  test("refuses what it cannot read: a compressed message, a bad envelope, a bad timeout, an unknown encoding", async () => {
    const before = calls;
    const compressed = envelope(Buffer.from("x"));
    compressed[0] = 1;
    const bad = async (headers: Record<string, string>, body: Buffer) =>
      (await h2(ECHO, { "content-type": "application/grpc", ...headers }, body)).trailers?.["grpc-status"];
    expect(await bad({}, compressed)).toBe(String(Code.InvalidArgument));
    expect(await bad({}, Buffer.from([0, 0, 0, 0, 9, 1]))).toBe(String(Code.InvalidArgument)); // says 9 bytes, has 1
    expect(await bad({}, Buffer.concat([envelope(Buffer.from("a")), envelope(Buffer.from("b"))]))).toBe(
      String(Code.InvalidArgument),
    );
    expect(await bad({ "grpc-timeout": "soon" }, envelope(Buffer.from("x")))).toBe(String(Code.InvalidArgument));
    expect(await bad({ "grpc-encoding": "gzip" }, envelope(Buffer.from("x")))).toBe(String(Code.Unimplemented));
    expect(calls).toBe(before);
  });

  test("other content types and every other path go to Connect's router", async () => {
    // The router has no such method: its 404, where the raw path would have answered 200.
    expect(
      (await h2(ECHO, { "content-type": "application/grpc+json" }, envelope(Buffer.from("{}")))).headers[":status"],
    ).toBe(404);
    const health = createClient(Health, createGrpcTransport({ baseUrl: url }));
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });
});
