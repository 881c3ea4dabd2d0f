// Rotating the CA as the operators' guide says: while the CA files hold both CAs (cat of the two
// ca.pem), a daemon with either CA's certificate takes clients with either CA's certificates;
// a third CA's are refused at the handshake.
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import { type RpcServer, serveRpc } from "../daemon/server";
import { limiterClients } from "../limiterclient/client";
import { captureLogger } from "../testkit/logcapture";
import { tempDir } from "../testkit/testkit";
import { initCerts } from "./certs";
import { roleGate } from "./roles";
import type { Role } from "./tls";

let old: string;
let next: string;
let stranger: string;
let bundle: Buffer;
const servers: RpcServer[] = [];
const { log } = captureLogger();
const file = (dir: string, name: string) => readFileSync(join(dir, name));

/** A daemon with the certificate of `dir` that takes the clients of both CAs, answering grpc.health.v1. */
async function daemon(dir: string): Promise<string> {
  const server = await serveRpc(
    (router) =>
      router.service(Health, {
        check: () => ({ status: HealthCheckResponse_ServingStatus.SERVING }),
        async *watch() {},
      }),
    "127.0.0.1",
    0,
    {
      tls: {
        cert: file(dir, "daemon.pem"),
        key: file(dir, "daemon.key"),
        clientCa: bundle,
        authorize: roleGate(log),
        handshakeRefused: () => {},
      },
    },
  );
  servers.push(server);
  return `https://127.0.0.1:${server.port}`;
}

const check = (url: string, dir: string, role: Role) =>
  limiterClients(url, { tls: { ca: bundle, cert: file(dir, `${role}.pem`), key: file(dir, `${role}.key`) } })
    .health.check({}, { timeoutMs: 5_000 })
    .then(
      (r) => HealthCheckResponse_ServingStatus[r.status],
      (err) => Code[ConnectError.from(err).code],
    );

beforeAll(async () => {
  [old, next, stranger] = [tempDir(), tempDir(), tempDir()];
  await Promise.all([initCerts(old, []), initCerts(next, []), initCerts(stranger, [])]);
  bundle = Buffer.concat([file(old, "ca.pem"), file(next, "ca.pem")]);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

test("with both CAs in the bundle, every pairing of old and new certificates talks; a third CA is refused", async () => {
  for (const daemonDir of [old, next]) {
    const url = await daemon(daemonDir);
    expect(await check(url, old, "front")).toBe("SERVING");
    expect(await check(url, next, "front")).toBe("SERVING");
    expect(await check(url, stranger, "front")).not.toBe("SERVING");
    // The role still counts: the new CA's worker certificate may not ask the fronts' RPC.
    expect(await check(url, next, "worker")).toBe("PermissionDenied");
  }
}, 30_000);
