// limiterd as its own process, called by a @grpc/grpc-js client and by Connect clients
// speaking each of the three protocols it serves on its one port, each with the plane secret
// (and refused without it).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DirectoryService, LimiterService, Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { freePort, REPO_ROOT, type Proc, runBun, runToEnd, tempDir, waitFor } from "../testkit/testkit";

let limiterd: Proc;
let port: number;
let env: Record<string, string>;
let token: string;
/** The plane secret limiterd made, as every call carries it. */
let bearer: string;

beforeAll(async () => {
  port = await freePort();
  env = { DATA_DIR: tempDir(), LIMITER_PORT: String(port), LIMITER_URL: `http://127.0.0.1:${port}` };
  limiterd = runBun("cmd/limiterd/index.ts", [], env);
  await waitFor(
    "limiterd",
    async () => (await runToEnd("cmd/admin/index.ts", ["org", "create", "rpc", "--plan", "premium"], env)).code === 0,
  );
  token = (await runToEnd("cmd/admin/index.ts", ["token", "create", "rpc"], env)).stdout.trim();
  bearer = `Bearer ${readFileSync(join(env.DATA_DIR!, "plane.secret"), "utf8").trim()}`;
});
afterAll(async () => {
  await limiterd?.stop("SIGKILL");
});

/** grpc-js clients; each call carries `authorization` unless it is null. */
function grpcJs(authorization: string | null = bearer) {
  const def = protoLoader.loadSync(["mailcore/limiter/v1/limiter.proto", "grpc/health/v1/health.proto"], {
    includeDirs: [join(REPO_ROOT, "proto")],
    longs: Number,
    enums: String,
    defaults: true,
  });
  // A package loaded at run time by grpc-js is untyped.
  const pkg = grpc.loadPackageDefinition(def) as any;
  const creds = grpc.credentials.createInsecure();
  const withSecret: grpc.Interceptor = (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        if (authorization !== null) metadata.set("authorization", authorization);
        next(metadata, listener);
      },
    });
  const o = { interceptors: [withSecret] };
  return {
    limiter: new pkg.mailcore.limiter.v1.LimiterService(`127.0.0.1:${port}`, creds, o),
    health: new pkg.grpc.health.v1.Health(`127.0.0.1:${port}`, creds, o),
  };
}

function unary<T>(client: any, method: string, req: unknown): Promise<T> {
  return new Promise((done, fail) => client[method](req, (err: Error | null, res: T) => (err ? fail(err) : done(res))));
}

describe("limiterd over gRPC with @grpc/grpc-js", () => {
  test("Admit, AdmitBatch and grpc.health.v1", async () => {
    const { limiter, health } = grpcJs();
    try {
      const firstAskedAt = performance.now();
      const one = await unary<Record<string, unknown>>(limiter, "Admit", { token, clientIp: "192.0.2.1" });
      expect(one).toMatchObject({
        verdict: "VERDICT_ALLOWED",
        orgSlug: "rpc",
        plan: "PLAN_PREMIUM",
        limit: 700,
        remaining: 699,
        resetSeconds: 1,
        // The admission ticket: the organization, an expiry in Unix seconds, a 128-bit MAC.
        ticket: expect.stringMatching(/^org_[0-9a-f]{16}\.\d{10}\.[A-Za-z0-9_-]{22}$/),
      });
      const batch = await unary<{ responses: Record<string, unknown>[] }>(limiter, "AdmitBatch", {
        requests: [
          { token, clientIp: "192.0.2.1" },
          { token: "", clientIp: "192.0.2.1" },
        ],
      });
      expect(batch.responses.map((r) => r.verdict)).toEqual(["VERDICT_ALLOWED", "VERDICT_UNAUTHENTICATED"]);
      // The bucket refills 700 a minute: a loaded machine may let one token come back between the
      // two calls, and no more than the time this test saw between them allows.
      const refilledAtMost = Math.floor(((performance.now() - firstAskedAt) * 700) / 60_000);
      expect(batch.responses[0]!.remaining).toBeGreaterThanOrEqual(698);
      expect(batch.responses[0]!.remaining).toBeLessThanOrEqual(Math.min(699, 698 + refilledAtMost));
      expect(await unary(health, "Check", { service: "" })).toEqual({ status: "SERVING" });
      const bad: grpc.ServiceError = await unary<never>(limiter, "Admit", { token, clientIp: "not-an-ip" }).catch(
        (e: grpc.ServiceError) => e,
      );
      expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(await unary(limiter, "Admit", { token: "", clientIp: "192.0.2.1" })).toMatchObject({
        verdict: "VERDICT_UNAUTHENTICATED",
        plan: "PLAN_FREE",
        remaining: 100,
      });
      // AdmitBatch in binary gRPC is served outside Connect's router: its refusals too.
      const badBatch: grpc.ServiceError = await unary<never>(limiter, "AdmitBatch", {
        requests: [{ token, clientIp: "not-an-ip" }],
      }).catch((e: grpc.ServiceError) => e);
      expect([badBatch.code, badBatch.details]).toEqual([
        grpc.status.INVALID_ARGUMENT,
        'client_ip is not an IP address: "not-an-ip"',
      ]);
      const tooBig: grpc.ServiceError = await unary<never>(limiter, "AdmitBatch", {
        requests: Array.from({ length: 1001 }, () => ({ token, clientIp: "192.0.2.2" })),
      }).catch((e: grpc.ServiceError) => e);
      expect(tooBig.code).toBe(grpc.status.INVALID_ARGUMENT);
      const unknownService: grpc.ServiceError = await unary<never>(health, "Check", { service: "nope" }).catch(
        (e: grpc.ServiceError) => e,
      );
      expect(unknownService.code).toBe(grpc.status.NOT_FOUND);
    } finally {
      limiter.close();
      health.close();
    }
  });

  test("without the plane secret, or with another, every call is UNAUTHENTICATED, AdmitBatch's raw path too", async () => {
    for (const authorization of [null, `Bearer ${"A".repeat(43)}`, bearer.toLowerCase()]) {
      const { limiter, health } = grpcJs(authorization);
      try {
        for (const [client, method, req] of [
          [limiter, "Admit", { token, clientIp: "192.0.2.1" }],
          [limiter, "AdmitBatch", { requests: [{ token, clientIp: "192.0.2.1" }] }],
          [health, "Check", { service: "" }],
        ] as const) {
          const err: grpc.ServiceError = await unary<never>(client, method, req).catch((e: grpc.ServiceError) => e);
          expect([method, err.code]).toEqual([method, grpc.status.UNAUTHENTICATED]);
        }
      } finally {
        limiter.close();
        health.close();
      }
    }
    expect(limiterd.stderr()).toContain('"msg":"refused an RPC: no plane secret"');
  });
});

describe("limiterd over Connect, gRPC-Web and Connect's gRPC client", () => {
  const withSecret: Interceptor = (next) => (req) => {
    req.header.set("authorization", bearer);
    return next(req);
  };
  const o = () => ({ baseUrl: `http://127.0.0.1:${port}`, interceptors: [withSecret] });
  for (const [name, transport] of [
    ["Connect", () => createConnectTransport({ ...o(), httpVersion: "2" })],
    ["gRPC-Web", () => createGrpcWebTransport({ ...o(), httpVersion: "2" })],
    // Connect's gRPC client: its AdmitBatch takes the daemon's raw path, like the API's.
    ["gRPC", () => createGrpcTransport(o())],
  ] as const) {
    test(`${name}: Admit`, async () => {
      const client = createClient(LimiterService, transport());
      const res = await client.admit({ token, clientIp: "2001:db8::7" });
      expect(res.verdict).toBe(Verdict.ALLOWED);
      expect(res.plan).toBe(Plan.PREMIUM);
      const directory = createClient(DirectoryService, transport());
      expect(await directory.verifyToken({ token })).toMatchObject({ valid: true, orgSlug: "rpc", plan: Plan.PREMIUM });
      expect(await directory.verifyToken({ token: `mc_${"Z".repeat(43)}` })).toMatchObject({ valid: false, orgId: "" });
      // Verifying consumes nothing: after 50 verifications the next admission has taken one token
      // (the bucket may have refilled meanwhile, never emptied by the verifications).
      const before = (await client.admit({ token, clientIp: "2001:db8::8" })).remaining;
      for (let i = 0; i < 50; i++) await directory.verifyToken({ token });
      expect((await client.admit({ token, clientIp: "2001:db8::8" })).remaining).toBeGreaterThanOrEqual(before - 1);
      const batch = await client.admitBatch({
        requests: [
          { token, clientIp: "192.0.2.9", withTags: true },
          { token: "", clientIp: "192.0.2.9" },
        ],
      });
      expect(batch.responses.map((r) => [r.verdict, r.orgSlug, r.plan])).toEqual([
        [Verdict.ALLOWED, "rpc", Plan.PREMIUM],
        [Verdict.UNAUTHENTICATED, "", Plan.FREE],
      ]);
      const tooBig = await client
        .admitBatch({ requests: Array.from({ length: 1001 }, () => ({ token, clientIp: "192.0.2.2" })) })
        .catch((e) => e);
      expect(String(tooBig)).toContain("at most 1000");
    });
  }
});

describe("the embedded store", () => {
  test("has one owner: a second limiterd on the same DATA_DIR stops with a clear line", async () => {
    const second = runBun("cmd/limiterd/index.ts", [], { ...env, LIMITER_PORT: String(await freePort()) });
    expect(await second.proc.exited).toBe(1);
    await second.drained;
    expect(second.stderr()).toContain("is in use by another limiterd");
  });
});
