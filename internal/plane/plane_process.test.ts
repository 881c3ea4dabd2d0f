// The internal plane on real processes and real TLS: limiterd on mutual TLS with Redis and
// PostgreSQL, the api, smtp, worker and admin CLI each with its role's certificate; and every
// way in that must be refused, with its code.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb";
import { DirectoryService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { SQL } from "bun";
import { Redis } from "ioredis";
import { connectRedis } from "../hotstore/redis/redis";
import { limiterTls } from "../config/config";
import { limiterClients } from "../limiterclient/client";
import { Db } from "../records/db";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import { viaNodemailer } from "../testkit/smtpclients";
import {
  clientTlsEnv,
  daemonTlsEnv,
  freePort,
  type RedisServer,
  runBun,
  runToEnd,
  type Stack,
  sendEmail,
  startRedis,
  startStack,
  tempDir,
  waitFor,
} from "../testkit/testkit";
import { type CertPem, initCerts, issueCert, newCa } from "./certs";
import { clientCredential, ensurePlaneSecret } from "./secret";
import type { ClientTls, Role } from "./tls";

let certs: string;
let redis: RedisServer;
let postgres: PostgresServer;
let storesCa: CertPem;
let database: string;
let stack: Stack;
let token: string;

const pem = (name: string) => readFileSync(join(certs, name));
/** A client's TLS with the certificate of `role` from the stack's certificates. */
const roleTls = (role: Role): ClientTls => limiterTls(clientTlsEnv(certs, role), stack.limiterUrl)!;
const delivered = (id: string) =>
  waitFor(`${id} in the sink`, async () => existsSync(join(stack.dataDir, "sink", `${id}.eml`)), 15_000);
/** "answered", or the code of the error and its message, as "Code: message". */
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "answered",
    (err) => `${Code[ConnectError.from(err).code]}: ${ConnectError.from(err).rawMessage}`,
  );

/** Calls fn, and waits for the daemon to log the handshake it refused, with the reason; returns the reason. */
async function refusedHandshake(fn: () => Promise<string>): Promise<string> {
  const seen = () =>
    stack.limiterd
      .stderr()
      .split("\n")
      .filter((line) => line.includes("refused a client at the TLS handshake"));
  const before = seen().length;
  expect(await fn()).not.toBe("answered");
  await waitFor("the refused handshake in the log", async () => seen().length > before);
  return JSON.parse(seen()[before]!).error;
}

beforeAll(async () => {
  certs = tempDir("mailcore-certs-");
  await initCerts(certs, []);
  // The stores' own CA and certificate, as a managed Redis or PostgreSQL would have.
  storesCa = await newCa("stores CA");
  const stores = await issueCert(storesCa, { name: "stores", hosts: ["localhost", "127.0.0.1"] });
  writeFileSync(join(certs, "stores-ca.pem"), storesCa.cert);
  [redis, postgres] = await Promise.all([
    startRedis({ tls: { ...stores, ca: storesCa.cert } }),
    startPostgres({ tls: stores }),
  ]);
  database = await postgres.newDatabase();
  stack = await startStack({
    certs,
    redisUrl: redis.url,
    workers: 1,
    // Generous deadlines: the machine running the tests may be loaded.
    env: {
      REDIS_TLS_CA: join(certs, "stores-ca.pem"),
      DATABASE_URL: `${database}?sslmode=verify-full&sslrootcert=${join(certs, "stores-ca.pem")}`,
      LANE_RATE: "1000",
      LIMITER_TIMEOUT_MS: "5000",
    },
  });
  token = await stack.org("acme", "enterprise");
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await Promise.all([redis?.stop(), postgres?.stop()]);
});

describe("limiterd on mutual TLS, with Redis and PostgreSQL", () => {
  test("the admin CLI with the admin certificate created the organization and its token", () => {
    expect(token).toMatch(/^mc_/);
  });

  test("a send through the API is accepted and delivered", async () => {
    const sent = await sendEmail(stack.apiUrls[0]!, token, {
      from: "Acme <no-reply@acme.example>",
      to: "jane@dest.example",
      subject: "over TLS",
      text: "Hello",
    });
    expect(sent.status).toBe(202);
    await delivered(sent.body.id as string);
  }, 30_000);

  test("a send through SMTP is accepted and delivered", async () => {
    const port = await freePort();
    const smtp = runBun("cmd/smtp/index.ts", [], {
      DATA_DIR: stack.dataDir,
      LIMITER_URL: stack.limiterUrl,
      API_URL: stack.apiUrls[0]!,
      SMTP_PORT: String(port),
      LIMITER_TIMEOUT_MS: "5000",
      ...clientTlsEnv(certs, "smtp"),
    });
    try {
      await waitFor(`smtp on ${port}`, async () => smtp.stderr().includes('"msg":"listening"'), 15_000);
      const outcome = await viaNodemailer({
        port,
        user: "acme",
        pass: token,
        mailFrom: "bounces@acme.example",
        to: ["joe@dest.example"],
        from: "Acme <no-reply@acme.example>",
        subject: "over TLS by SMTP",
        text: "Hello",
      });
      expect(outcome.failure, outcome.transcript).toBeUndefined();
      await delivered(outcome.queued!.id);
    } finally {
      await smtp.stop();
    }
  }, 30_000);

  test("Connect and gRPC-Web work over TLS too (ALPN h2)", async () => {
    const tls = roleTls("front");
    for (const transport of [
      createConnectTransport({ baseUrl: stack.limiterUrl, httpVersion: "2", nodeOptions: tls }),
      createGrpcWebTransport({ baseUrl: stack.limiterUrl, httpVersion: "2", nodeOptions: tls }),
    ]) {
      expect((await createClient(Health, transport).check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      const directory = createClient(DirectoryService, transport);
      expect(await codeOf(directory.createToken({ slug: "acme" }))).toMatch(/^PermissionDenied: /);
    }
  }, 30_000);
});

describe("the stores over TLS", () => {
  test("limiterd's records are on TLS connections to PostgreSQL (sslmode=verify-full), its hot state on rediss://", async () => {
    // The Redis server takes TLS only (port 0), so the daemon's hot state reached it over TLS.
    expect(redis.url).toStartWith("rediss://");
    const sql = new SQL({ url: postgres.url, max: 1 });
    try {
      const [row] = await sql`SELECT count(*)::int AS n FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
        WHERE datname = ${new URL(database).pathname.slice(1)} AND ssl`;
      expect(row.n).toBeGreaterThan(0);
    } finally {
      await sql.close();
    }
  }, 30_000);

  test("a store whose certificate the given CA did not sign is refused", async () => {
    const other = Buffer.from((await newCa("another stores CA")).cert);
    // ioredis reports the failed handshake as a closed connection; the right CA connects.
    const tryRedis = (tlsCa: Buffer) =>
      connectRedis(redis.url, { tlsCa, connectTimeoutMs: 5_000 }).then(
        async (r) => {
          await r.quit();
          return "connected";
        },
        (e: Error) => e.message,
      );
    expect(await tryRedis(other)).toBe("Connection is closed.");
    expect(await tryRedis(Buffer.from(storesCa.cert))).toBe("connected");
    const otherFile = join(certs, "other-stores-ca.pem");
    writeFileSync(otherFile, other);
    const opened = Db.open({ url: `${database}?sslmode=verify-full&sslrootcert=${otherFile}`, sqliteFile: ":memory:" });
    expect(
      await opened.then(
        () => "opened",
        (e) => e.message,
      ),
    ).toBe("unable to verify the first certificate");
  }, 30_000);

  test("a store whose certificate, from the right CA, names another host is refused", async () => {
    const elsewhere = await issueCert(storesCa, { name: "elsewhere", hosts: ["db.elsewhere.example"] });
    const [otherRedis, otherPostgres] = await Promise.all([
      startRedis({ tls: { ...elsewhere, ca: storesCa.cert } }),
      startPostgres({ tls: elsewhere }),
    ]);
    try {
      const ca = join(certs, "stores-ca.pem");
      const opened = Db.open({
        url: `${otherPostgres.url}?sslmode=verify-full&sslrootcert=${ca}`,
        sqliteFile: ":memory:",
      });
      expect(
        await opened.then(
          () => "opened",
          (e) => e.message,
        ),
      ).toBe("Hostname/IP does not match certificate's altnames");
      // The same server and CA without the check of the name: it is the name that was refused.
      const unnamed = await Db.open({
        url: `${otherPostgres.url}?sslmode=verify-ca&sslrootcert=${ca}`,
        sqliteFile: ":memory:",
      });
      await unnamed.close();
      // ioredis reports the failed handshake as a closed connection; told the name, it connects.
      const tryRedis = async (servername?: string) => {
        const r = new Redis(otherRedis.url, {
          tls: { ca: storesCa.cert, ...(servername ? { servername } : {}) },
          lazyConnect: true,
          retryStrategy: () => null,
        });
        r.on("error", () => {});
        return r.connect().then(
          async () => {
            await r.quit();
            return "connected";
          },
          (e: Error) => e.message,
        );
      };
      expect(await tryRedis()).toBe("Connection is closed.");
      expect(await tryRedis("db.elsewhere.example")).toBe("connected");
    } finally {
      await Promise.all([otherRedis.stop(), otherPostgres.stop()]);
    }
  }, 60_000);
});

describe("refused", () => {
  // Without a certificate: a cleartext client, with a plane secret of its own.
  const cleartext = () => {
    const dir = tempDir();
    ensurePlaneSecret(dir);
    return clientCredential(undefined, dir);
  };
  const createToken = (url: string, tls?: Partial<ClientTls>) =>
    codeOf(
      limiterClients(url, tls ? { tls: tls as ClientTls } : cleartext()).directory.createToken(
        { slug: "acme" },
        { timeoutMs: 5_000 },
      ),
    );

  test("cleartext h2c on the TLS port", async () => {
    // Connect's client sees the connection closed; the daemon read the h2c preface as a broken handshake.
    const url = stack.limiterUrl.replace("https:", "http:");
    expect(await refusedHandshake(() => createToken(url))).toMatch(/WRONG_VERSION_NUMBER/);
  }, 30_000);

  test("TLS without a client certificate, with one from another CA, and with an expired one: at the handshake", async () => {
    const ca = pem("ca.pem");
    const stranger = await issueCert(await newCa("another CA"), { name: "stranger", roles: ["admin"] });
    const expired = await issueCert(
      { cert: ca.toString(), key: pem("ca.key").toString() },
      {
        name: "expired admin",
        roles: ["admin"],
        notBefore: new Date(Date.now() - 10 * 86_400_000),
        notAfter: new Date(Date.now() - 86_400_000),
      },
    );
    const withCert = (c: { cert: string; key: string }) => ({ ca, cert: Buffer.from(c.cert), key: Buffer.from(c.key) });
    expect(await refusedHandshake(() => createToken(stack.limiterUrl, { ca }))).toMatch(
      /PEER_DID_NOT_RETURN_A_CERTIFICATE/,
    );
    expect(await refusedHandshake(() => createToken(stack.limiterUrl, withCert(stranger)))).toBe(
      "unable to verify the first certificate",
    );
    expect(await refusedHandshake(() => createToken(stack.limiterUrl, withCert(expired)))).toBe(
      "certificate has expired",
    );
    // The admin certificate itself is let in: the refusals above were the certificates'.
    expect(await createToken(stack.limiterUrl, roleTls("admin"))).toBe("answered");
  }, 30_000);

  test("a certificate without the RPC's role: permission_denied, logged with the RPC and the subject", async () => {
    expect(await createToken(stack.limiterUrl, roleTls("front"))).toMatch(/^PermissionDenied: /);
    const worker = limiterClients(stack.limiterUrl, { tls: roleTls("worker") });
    expect(await codeOf(worker.admitBatch([{ token, clientIp: "192.0.2.1", withTags: false }], 5_000))).toMatch(
      /^PermissionDenied: /,
    );
    expect(await codeOf(worker.limiter.admit({ token, clientIp: "192.0.2.1" }))).toMatch(/^PermissionDenied: /);
    const admin = limiterClients(stack.limiterUrl, { tls: roleTls("admin") });
    const lease = async () => {
      for await (const _ of admin.delivery.lease({ maxInFlight: 1 }, { timeoutMs: 5_000 })) return;
    };
    expect(await codeOf(lease())).toMatch(/^PermissionDenied: /);
    await waitFor("the refusals in the log", async () =>
      stack.limiterd.stderr().includes("/mailcore.limiter.v1.DeliveryService/Lease"),
    );
    const refusals = stack.limiterd
      .stderr()
      .split("\n")
      .filter((line) => line.includes("refused an RPC"));
    expect(refusals.some((l) => l.includes("DirectoryService/CreateToken") && l.includes("CN=mailcore front"))).toBe(
      true,
    );
    expect(refusals.some((l) => l.includes("LimiterService/AdmitBatch") && l.includes("CN=mailcore worker"))).toBe(
      true,
    );
    expect(refusals.some((l) => l.includes("DeliveryService/Lease") && l.includes("CN=mailcore admin"))).toBe(true);
    expect(refusals.some((l) => l.includes(token))).toBe(false);
  }, 30_000);
});

test("a certificate naming several roles is served the RPCs of each, and no others", async () => {
  const ca = pem("ca.pem");
  const both = await issueCert(
    { cert: ca.toString(), key: pem("ca.key").toString() },
    { name: "mailcore front and worker", roles: ["front", "worker"] },
  );
  const clients = limiterClients(stack.limiterUrl, {
    tls: { ca, cert: Buffer.from(both.cert), key: Buffer.from(both.key) },
  });
  expect(await codeOf(clients.health.check({}))).toBe("answered");
  expect(await codeOf(clients.webhookDelivery.reportWebhookAttempts({ reports: [] }))).toBe("answered");
  expect(await codeOf(clients.directory.createToken({ slug: "acme" }))).toMatch(/^PermissionDenied: /);
}, 30_000);

describe("starting limiterd", () => {
  const start = (env: Record<string, string>) =>
    runBun("cmd/limiterd/index.ts", [], { DATA_DIR: tempDir(), LIMITER_HOST: "0.0.0.0", ...env });

  test("refuses an address other than loopback without mutual TLS, naming the variables", async () => {
    const r = await runToEnd("cmd/limiterd/index.ts", [], {
      DATA_DIR: tempDir(),
      LIMITER_HOST: "0.0.0.0",
      LIMITER_PORT: String(await freePort()),
    });
    expect(r.code).toBe(2);
    for (const name of [
      "LIMITER_HOST",
      "LIMITER_TLS_CERT",
      "LIMITER_TLS_KEY",
      "LIMITER_TLS_CLIENT_CA",
      "LIMITER_INSECURE",
    ])
      expect(r.stderr).toContain(name);
  }, 30_000);

  test("LIMITER_INSECURE=1 starts it anyway, with a warning; mutual TLS starts it without one", async () => {
    const insecure = start({ LIMITER_PORT: String(await freePort()), LIMITER_INSECURE: "1" });
    const secure = start({
      LIMITER_PORT: String(await freePort()),
      ...daemonTlsEnv(certs),
    });
    try {
      for (const p of [insecure, secure])
        await waitFor("listening", async () => p.stderr().includes('"msg":"listening"'), 15_000);
      expect(insecure.stderr()).toContain("LIMITER_INSECURE=1");
      expect(secure.stderr()).not.toContain("LIMITER_INSECURE");
    } finally {
      await Promise.all([insecure.stop(), secure.stop()]);
    }
  }, 30_000);
});

test("certs init writes the CA, the daemon's and each role's pair, keys mode 0600, and never over a CA", async () => {
  const dir = join(tempDir(), "certs");
  const r = await runToEnd(
    "cmd/admin/index.ts",
    ["certs", "init", dir, "--host", "limiterd.internal", "--host", "10.0.0.7"],
    {},
  );
  expect(r.code).toBe(0);
  for (const name of ["ca", "daemon", "front", "worker", "admin"]) {
    expect(statSync(join(dir, `${name}.key`)).mode & 0o777).toBe(0o600);
    // A line end at the end: `cat` of two CA files is a bundle that TLS reads (rotation).
    expect(readFileSync(join(dir, `${name}.pem`), "utf8")).toEndWith("-----END CERTIFICATE-----\n");
  }
  const daemon = new X509Certificate(readFileSync(join(dir, "daemon.pem")));
  expect(daemon.subjectAltName).toBe("DNS:localhost, IP Address:127.0.0.1, DNS:limiterd.internal, IP Address:10.0.0.7");
  const front = new X509Certificate(readFileSync(join(dir, "front.pem")));
  expect(front.subjectAltName).toBe("URI:urn:mailcore:role:front");
  const again = await runToEnd("cmd/admin/index.ts", ["certs", "init", dir], {});
  expect([again.code, again.stderr]).toEqual([1, expect.stringContaining("already holds")]);
}, 30_000);
