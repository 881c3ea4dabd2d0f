import { beforeAll, describe, expect, test } from "bun:test";
import { runToEnd } from "../testkit/testkit";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { initCerts } from "../plane/certs";
import { tempDir } from "../testkit/testkit";
import { apiConfig, ConfigError, limiterdConfig, mxConfig, smtpConfig, workerConfig } from "./config";

describe("configuration", () => {
  test("defaults", () => {
    expect(apiConfig({})).toMatchObject({
      host: "127.0.0.1",
      port: 8080,
      limiterUrl: "http://127.0.0.1:7070",
      limiterTimeoutMs: 1_000,
      audienceTimeoutMs: 5_000,
      trustProxy: [],
      docsUrl: undefined,
    });
    expect(limiterdConfig({})).toMatchObject({ port: 7070, redisUrl: undefined, host: "127.0.0.1" });
  });

  test.each([
    [{ API_PORT: "abc" }, 'API_PORT="abc" is not a whole number from 1 to 65535'],
    [{ API_PORT: "70000" }, "API_PORT"],
    [{ LIMITER_URL: "grpc://x" }, 'LIMITER_URL="grpc://x" must use http://'],
    [{ TRUST_PROXY: "10.0.0.1, proxy.local" }, 'TRUST_PROXY holds "proxy.local"'],
    [{ DOCS_URL: "not a url" }, "DOCS_URL"],
    [{ LIMITER_TIMEOUT_MS: "0" }, "LIMITER_TIMEOUT_MS"],
    [{ AUDIENCE_TIMEOUT_MS: "200000" }, "AUDIENCE_TIMEOUT_MS"],
    [{ API_HOST: "everywhere" }, "API_HOST"],
  ])("api rejects %p", (env, message) => {
    expect(() => apiConfig(env)).toThrow(ConfigError);
    expect(() => apiConfig(env)).toThrow(message);
  });

  test("DNS_SERVER: an IP address, optionally with a port", () => {
    expect(limiterdConfig({}).dnsServer).toBeUndefined();
    for (const ok of ["127.0.0.1", "127.0.0.1:5353", "::1", "[::1]:5353"])
      expect(limiterdConfig({ DNS_SERVER: ok }).dnsServer).toBe(ok);
    for (const bad of ["dns.example", "127.0.0.1:0", "127.0.0.1:99999", "[::1]", "1.2.3.4:x"]) {
      expect(() => limiterdConfig({ DNS_SERVER: bad })).toThrow(
        `DNS_SERVER=${JSON.stringify(bad)} is not a DNS server address`,
      );
    }
  });

  test("PUBLIC_URL: where links in mail point; http or https", () => {
    expect(limiterdConfig({}).publicUrl).toBe("http://127.0.0.1:8080");
    expect(limiterdConfig({ PUBLIC_URL: "https://mail.example.com" }).publicUrl).toBe("https://mail.example.com");
    expect(() => limiterdConfig({ PUBLIC_URL: "mail.example.com" })).toThrow(
      'PUBLIC_URL="mail.example.com" is not a URL',
    );
    expect(() => limiterdConfig({ PUBLIC_URL: "ftp://mail.example.com" })).toThrow("must use http:// or https://");
  });

  test("limiterd rejects a non-Redis REDIS_URL", () => {
    expect(() => limiterdConfig({ REDIS_URL: "http://localhost:6379" })).toThrow(
      'REDIS_URL="http://localhost:6379" must use redis:// or rediss://',
    );
  });

  test.each([
    [{ DATABASE_URL: "mysql://db/mail" }, 'DATABASE_URL="mysql://db/mail" must use postgres:// or postgresql://'],
    [{ REDIS_CLUSTER_NODES: "10.0.0.1:7000,10.0.0.2" }, 'REDIS_CLUSTER_NODES holds "10.0.0.2", which is not host:port'],
    [{ REDIS_CLUSTER_NODES: "a:7000", REDIS_URL: "redis://b:6379" }, "not both"],
    [{ MESSAGE_RETENTION_DAYS: "0" }, "MESSAGE_RETENTION_DAYS"],
  ])("limiterd rejects %p", (env, message) => {
    expect(() => limiterdConfig(env)).toThrow(message);
  });

  test("the master key: DKIM_MASTER_KEY as given, the base64 of 32 bytes; unset, the file's", () => {
    const key = Buffer.alloc(32, 9).toString("base64");
    expect(limiterdConfig({ DKIM_MASTER_KEY: key }).masterKey).toBe(key);
    expect(limiterdConfig({}).masterKey).toBeUndefined();
    for (const bad of ["short", Buffer.alloc(31).toString("base64"), `${key.slice(0, -2)}!=`])
      expect(() => limiterdConfig({ DKIM_MASTER_KEY: bad })).toThrow("DKIM_MASTER_KEY must be the base64 of 32");
  });

  test("the sending domains: the return path's label, the SPF include and inbound host under PUBLIC_URL's host, Ed25519 off, an hourly recheck", () => {
    expect(limiterdConfig({}).domains).toEqual({
      returnPathSubdomain: "bounces",
      spfInclude: "_spf.mailcore.invalid",
      inboundHost: "mx.mailcore.invalid",
      ed25519: false,
      recheckMs: 3_600_000,
    });
    expect(
      limiterdConfig({
        PUBLIC_URL: "https://mail.example.com",
        RETURN_PATH_SUBDOMAIN: "Rp.Out",
        DKIM_ED25519: "1",
        DOMAIN_RECHECK_S: "600",
      }).domains,
    ).toEqual({
      returnPathSubdomain: "rp.out",
      spfInclude: "_spf.mail.example.com",
      inboundHost: "mx.mail.example.com",
      ed25519: true,
      recheckMs: 600_000,
    });
    expect(() => limiterdConfig({ RETURN_PATH_SUBDOMAIN: "bounces@x" })).toThrow(
      'RETURN_PATH_SUBDOMAIN="bounces@x" is not a DNS name',
    );
    expect(() => limiterdConfig({ RETURN_PATH_SUBDOMAIN: "_bounces" })).toThrow("RETURN_PATH_SUBDOMAIN");
    expect(() => limiterdConfig({ SPF_INCLUDE: "-spf.example" })).toThrow("SPF_INCLUDE");
    expect(() => limiterdConfig({ DKIM_ED25519: "yes" })).toThrow("DKIM_ED25519");
    expect(() => limiterdConfig({ DOMAIN_RECHECK_S: "5" })).toThrow("DOMAIN_RECHECK_S");
  });

  test("a client's credential: the plane secret in DATA_DIR on http://, the certificate on https://", () => {
    expect(apiConfig({ DATA_DIR: "/srv/mail" }).limiterCredential).toEqual({ secretFile: "/srv/mail/plane.secret" });
    expect(workerConfig({}).limiterCredential).toEqual({ secretFile: resolve("data/plane.secret") });
  });

  test("the replicas a change waits for: detected by default, a count, the timeout; Sentinel", () => {
    const redis = { REDIS_URL: "redis://r:6379" };
    expect(limiterdConfig(redis).redisWait).toEqual({ replicas: "detect", timeoutMs: 250 });
    expect(limiterdConfig({ ...redis, REDIS_WAIT_REPLICAS: "0", REDIS_WAIT_TIMEOUT_MS: "40" }).redisWait).toEqual({
      replicas: 0,
      timeoutMs: 40,
    });
    expect(
      limiterdConfig({ REDIS_URL: "redis+sentinel://:s%40cret@s1:26379,s2:26380/mymaster", REDIS_WAIT_REPLICAS: "2" }),
    ).toMatchObject({
      redisSentinel: {
        sentinels: [
          { host: "s1", port: 26379 },
          { host: "s2", port: 26380 },
        ],
        name: "mymaster",
        password: "s@cret",
      },
      redisWait: { replicas: 2 },
    });
    expect(limiterdConfig(redis).redisSentinel).toBeUndefined();
  });

  test.each([
    [{ REDIS_URL: "redis://r:6379", REDIS_WAIT_REPLICAS: "one" }, 'REDIS_WAIT_REPLICAS="one" is not a whole number'],
    [{ REDIS_URL: "redis://r:6379", REDIS_WAIT_REPLICAS: "17" }, "from 0 to 16"],
    [{ REDIS_URL: "redis://r:6379", REDIS_WAIT_TIMEOUT_MS: "0" }, 'REDIS_WAIT_TIMEOUT_MS="0" is not a whole number'],
    [{ REDIS_WAIT_REPLICAS: "1" }, "REDIS_WAIT_REPLICAS needs Redis"],
    [{ REDIS_URL: "redis+sentinel://s1:26379" }, "is not a Sentinel URL"],
    [{ REDIS_URL: "redis+sentinel://s1:26379,s2/mymaster" }, 'holds "s2", which is not host:port'],
  ])("limiterd rejects the wait or Sentinel setting %p", (env, message) => {
    expect(() => limiterdConfig(env)).toThrow(message);
  });

  test("webhooks: the schedule divisor (tests only), the worker's concurrency, private URLs", () => {
    expect(limiterdConfig({}).webhookScheduleDivisor).toBe(1);
    expect(limiterdConfig({ WEBHOOK_SCHEDULE_DIVISOR: "1000" }).webhookScheduleDivisor).toBe(1_000);
    expect(() => limiterdConfig({ WEBHOOK_SCHEDULE_DIVISOR: "0" })).toThrow("WEBHOOK_SCHEDULE_DIVISOR");
    expect(workerConfig({}).webhookConcurrency).toBe(64);
    expect(() => workerConfig({ WEBHOOK_CONCURRENCY: "2000" })).toThrow("WEBHOOK_CONCURRENCY");
    expect(workerConfig({}).webhookAllowPrivateUrls).toBe(false);
    expect(workerConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: "1" }).webhookAllowPrivateUrls).toBe(true);
    expect(() => workerConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: "yes" })).toThrow("WEBHOOK_ALLOW_PRIVATE_URLS");
  });

  test("retries: the short schedule, and the one in hours with its divisor (tests only)", () => {
    expect(limiterdConfig({})).toMatchObject({
      maxAttempts: 5,
      retryBaseMs: 30_000,
      maxRetryHours: 48,
      retryScheduleDivisor: 1,
    });
    expect(limiterdConfig({ MAX_RETRY_HOURS: "72", RETRY_SCHEDULE_DIVISOR: "1000" })).toMatchObject({
      maxRetryHours: 72,
      retryScheduleDivisor: 1_000,
    });
    expect(() => limiterdConfig({ MAX_RETRY_HOURS: "0" })).toThrow("MAX_RETRY_HOURS");
    expect(() => limiterdConfig({ RETRY_SCHEDULE_DIVISOR: "0" })).toThrow("RETRY_SCHEDULE_DIVISOR");
  });

  test("limiterd: the stores", () => {
    expect(limiterdConfig({})).toMatchObject({
      databaseUrl: undefined,
      redisClusterNodes: undefined,
      retentionMs: 30 * 86_400_000,
    });
    expect(
      limiterdConfig({ DATABASE_URL: "postgresql://u@db:5432/mail", REDIS_CLUSTER_NODES: "r1:7000, r2:7001" }),
    ).toMatchObject({
      databaseUrl: "postgresql://u@db:5432/mail",
      redisClusterNodes: ["r1:7000", "r2:7001"],
    });
  });

  test.each([
    ["cmd/api/index.ts", { API_PORT: "eighty" }, "api: configuration error: API_PORT"],
    ["cmd/limiterd/index.ts", { LIMITER_PORT: "-1" }, "limiterd: configuration error: LIMITER_PORT"],
    ["cmd/limiterd/index.ts", { DNS_SERVER: "dns.example" }, "limiterd: configuration error: DNS_SERVER"],
    [
      "cmd/limiterd/index.ts",
      { REDIS_URL: "redis://127.0.0.1:1", REDIS_WAIT_TIMEOUT_MS: "soon" },
      "limiterd: configuration error: REDIS_WAIT_TIMEOUT_MS",
    ],
    ["cmd/admin/index.ts", { LIMITER_URL: "nope" }, "admin: configuration error: LIMITER_URL"],
    ["cmd/dev/index.ts", { API_PORT: "0" }, "dev: configuration error: API_PORT"],
    ["cmd/smtp/index.ts", { SMTP_PORT: "smtp" }, "smtp: configuration error: SMTP_PORT"],
    [
      "cmd/smtp/index.ts",
      { SMTP_TLS_CERT: "/nonexistent/cert.pem", SMTP_TLS_KEY: "/nonexistent/key.pem" },
      "smtp: configuration error: SMTP_TLS_CERT",
    ],
    [
      "cmd/smtp/index.ts",
      { SMTP_HOST: "0.0.0.0" },
      "smtp: configuration error: SMTP_HOST=0.0.0.0 is not a loopback address, and without SMTP_TLS_CERT and SMTP_TLS_KEY the front would offer a self-signed certificate",
    ],
  ])("%s stops with one line and exit code 2", async (entry, env, line) => {
    const r = await runToEnd(entry, [], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toStartWith(line);
  });

  describe("smtp", () => {
    const dir = tempDir("mailcore-config-");
    const cert = join(dir, "cert.pem");
    const key = join(dir, "key.pem");
    writeFileSync(cert, "not a certificate");
    writeFileSync(key, "not a key");

    test("defaults", () => {
      expect(smtpConfig({})).toMatchObject({
        host: "127.0.0.1",
        port: 587,
        tlsCert: undefined,
        tlsKey: undefined,
        apiUrl: "http://127.0.0.1:8080",
        limiterUrl: "http://127.0.0.1:7070",
        limiterTimeoutMs: 1_000,
        maxClients: 1_000,
        maxClientsPerIp: 10,
        maxWaitingPerIp: 100,
        maxSessionsPerOrg: 200,
        socketTimeoutMs: 60_000,
        sessionTimeoutMs: 300_000,
        apiTimeoutMs: 10_000,
      });
      expect(smtpConfig({ SMTP_TLS_CERT: cert, SMTP_TLS_KEY: key })).toMatchObject({ tlsCert: cert, tlsKey: key });
    });

    test.each([
      [{ SMTP_PORT: "0" }, 'SMTP_PORT="0" is not a whole number from 1 to 65535'],
      [{ SMTP_HOST: "mail.example.com" }, "SMTP_HOST"],
      [{ SMTP_TLS_CERT: cert }, "SMTP_TLS_CERT and SMTP_TLS_KEY go together"],
      [{ SMTP_TLS_KEY: key }, "SMTP_TLS_CERT and SMTP_TLS_KEY go together"],
      [{ SMTP_TLS_CERT: join(dir, "missing.pem"), SMTP_TLS_KEY: key }, "SMTP_TLS_CERT="],
      [{ SMTP_TLS_CERT: cert, SMTP_TLS_KEY: dir }, "SMTP_TLS_KEY="],
      [{ API_URL: "ftp://api" }, 'API_URL="ftp://api" must use http:// or https://'],
      [{ LIMITER_URL: "nope" }, "LIMITER_URL"],
      [{ SMTP_MAX_CLIENTS: "0" }, "SMTP_MAX_CLIENTS"],
      [{ SMTP_MAX_WAITING_PER_IP: "-1" }, "SMTP_MAX_WAITING_PER_IP"],
      [{ SMTP_MAX_SESSIONS_PER_ORG: "0" }, "SMTP_MAX_SESSIONS_PER_ORG"],
      [{ SMTP_SOCKET_TIMEOUT_MS: "5" }, "SMTP_SOCKET_TIMEOUT_MS"],
      [{ SMTP_SESSION_TIMEOUT_MS: "soon" }, "SMTP_SESSION_TIMEOUT_MS"],
      [{ SMTP_API_TIMEOUT_MS: "-1" }, "SMTP_API_TIMEOUT_MS"],
    ])("rejects %p", (env, message) => {
      expect(() => smtpConfig(env)).toThrow(ConfigError);
      expect(() => smtpConfig(env)).toThrow(message);
    });

    test("off loopback: a certificate of its own, or SMTP_ALLOW_SELF_SIGNED=1", () => {
      for (const host of ["127.0.0.1", "::1", "localhost"]) expect(smtpConfig({ SMTP_HOST: host }).host).toBe(host);
      for (const host of ["0.0.0.0", "::", "192.0.2.25"])
        expect(() => smtpConfig({ SMTP_HOST: host })).toThrow(
          `SMTP_HOST=${host} is not a loopback address, and without SMTP_TLS_CERT and SMTP_TLS_KEY the front would offer a self-signed certificate no client can verify: set both (PEM files), or SMTP_ALLOW_SELF_SIGNED=1 to serve it anyway`,
        );
      expect(smtpConfig({ SMTP_HOST: "0.0.0.0", SMTP_ALLOW_SELF_SIGNED: "1" }).host).toBe("0.0.0.0");
      expect(smtpConfig({ SMTP_HOST: "0.0.0.0", SMTP_TLS_CERT: cert, SMTP_TLS_KEY: key }).host).toBe("0.0.0.0");
      expect(() => smtpConfig({ SMTP_ALLOW_SELF_SIGNED: "yes" })).toThrow("SMTP_ALLOW_SELF_SIGNED");
    });

    test("cmd/smtp: a certificate pair TLS cannot use stops it with one line and exit code 2", async () => {
      const r = await runToEnd("cmd/smtp/index.ts", [], { SMTP_TLS_CERT: cert, SMTP_TLS_KEY: key, SMTP_PORT: "1" });
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toStartWith(
        `smtp: configuration error: the TLS certificate ${cert} and key ${key} cannot be used`,
      );
    });
  });
});

describe("the internal plane's TLS", () => {
  let dir: string;
  let daemonTls: Record<string, string>;
  let frontTls: Record<string, string>;
  beforeAll(async () => {
    dir = tempDir();
    await initCerts(dir, []);
    daemonTls = {
      LIMITER_TLS_CERT: join(dir, "daemon.pem"),
      LIMITER_TLS_KEY: join(dir, "daemon.key"),
      LIMITER_TLS_CLIENT_CA: join(dir, "ca.pem"),
    };
    frontTls = {
      LIMITER_TLS_CA: join(dir, "ca.pem"),
      LIMITER_TLS_CLIENT_CERT: join(dir, "front.pem"),
      LIMITER_TLS_CLIENT_KEY: join(dir, "front.key"),
    };
  });

  test("limiterd: the three variables together, read at start", () => {
    expect(limiterdConfig({}).tls).toBeUndefined();
    expect(limiterdConfig(daemonTls).tls?.clientCa.toString()).toContain("BEGIN CERTIFICATE");
    expect(() => limiterdConfig({ LIMITER_TLS_CERT: daemonTls.LIMITER_TLS_CERT })).toThrow(
      "LIMITER_TLS_CERT, LIMITER_TLS_KEY and LIMITER_TLS_CLIENT_CA go together",
    );
    expect(() => limiterdConfig({ ...daemonTls, LIMITER_TLS_KEY: join(dir, "front.key") })).toThrow(
      "cannot be used together",
    );
  });

  test("limiterd off loopback: mutual TLS, or LIMITER_INSECURE=1", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
      expect(limiterdConfig({ LIMITER_HOST: host }).host).toBe(host);
    for (const host of ["0.0.0.0", "::", "10.0.0.7"])
      expect(() => limiterdConfig({ LIMITER_HOST: host })).toThrow(
        `LIMITER_HOST=${host} is not a loopback address, and anyone who reaches the port could call every RPC: set LIMITER_TLS_CERT, LIMITER_TLS_KEY and LIMITER_TLS_CLIENT_CA (mutual TLS), or LIMITER_INSECURE=1`,
      );
    expect(limiterdConfig({ LIMITER_HOST: "0.0.0.0", LIMITER_INSECURE: "1" }).insecure).toBe(true);
    expect(limiterdConfig({ LIMITER_HOST: "0.0.0.0", ...daemonTls }).insecure).toBe(false);
    expect(() => limiterdConfig({ LIMITER_INSECURE: "yes" })).toThrow("LIMITER_INSECURE");
  });

  test("REDIS_TLS_CA: the CA of a rediss:// server", () => {
    const ca = join(dir, "ca.pem");
    expect(limiterdConfig({ REDIS_URL: "rediss://redis.internal:6380", REDIS_TLS_CA: ca }).redisTlsCa).toBeInstanceOf(
      Buffer,
    );
    expect(() => limiterdConfig({ REDIS_URL: "redis://redis.internal:6379", REDIS_TLS_CA: ca })).toThrow(
      "REDIS_TLS_CA needs REDIS_URL=rediss://",
    );
  });

  test("clients: https:// with a client certificate, http:// without TLS variables", () => {
    const https = { LIMITER_URL: "https://limiterd.internal:7070" };
    expect(apiConfig({ ...https, ...frontTls }).limiterTls?.cert.toString()).toContain("BEGIN CERTIFICATE");
    expect(workerConfig({}).limiterTls).toBeUndefined();
    expect(() => workerConfig(https)).toThrow(
      "LIMITER_URL=https:// needs LIMITER_TLS_CLIENT_CERT and LIMITER_TLS_CLIENT_KEY",
    );
    expect(() => smtpConfig(frontTls)).toThrow(
      "LIMITER_TLS_CA, LIMITER_TLS_CLIENT_CERT and LIMITER_TLS_CLIENT_KEY need LIMITER_URL=https://host:port",
    );
    expect(() => apiConfig({ ...https, ...frontTls, LIMITER_TLS_CLIENT_KEY: join(dir, "ca.key") })).toThrow(
      "cannot be used together",
    );
  });
});

describe("MX delivery", () => {
  test("defaults: port 25, this host's name, the repository's shaping file, public hosts only", () => {
    const c = mxConfig({});
    expect(c.port).toBe(25);
    expect(c.heloName.length).toBeGreaterThan(0);
    expect(c.shapingFile).toBeUndefined();
    expect(c.allowPrivate).toBe(false);
    expect(c.trustedCa).toBeUndefined();
  });

  test("set values are taken", () => {
    const file = join(tempDir(), "shaping.json");
    writeFileSync(file, "{}");
    const c = mxConfig({
      MX_PORT: "2525",
      MX_HELO_NAME: "out.example.org",
      MX_SHAPING_FILE: file,
      MX_ALLOW_PRIVATE: "1",
    });
    expect(c).toEqual({
      port: 2525,
      heloName: "out.example.org",
      shapingFile: file,
      allowPrivate: true,
      trustedCa: undefined,
      timeouts: { setupMs: 30_000, replyMs: 60_000, messageMs: 300_000 },
    });
    expect(
      mxConfig({ MX_SETUP_TIMEOUT_MS: "1000", MX_REPLY_TIMEOUT_MS: "2000", MX_MESSAGE_TIMEOUT_MS: "3000" }).timeouts,
    ).toEqual({
      setupMs: 1_000,
      replyMs: 2_000,
      messageMs: 3_000,
    });
  });

  test("DELIVERY: unset, the relay when one is set and the file sink otherwise; mx reads the MX settings", () => {
    expect(workerConfig({}).delivery).toBe("file");
    expect(workerConfig({ SMTP_RELAY_URL: "smtp://relay.example:25" }).delivery).toBe("relay");
    const mx = workerConfig({ DELIVERY: "mx", MX_PORT: "2525" });
    expect(mx.delivery).toBe("mx");
    expect(mx.mx?.port).toBe(2525);
    expect(workerConfig({}).mx).toBeUndefined();
  });

  test.each([
    [{ DELIVERY: "smtp" }, "DELIVERY"],
    [{ DELIVERY: "relay" }, "DELIVERY=relay needs SMTP_RELAY_URL"],
    [{ DELIVERY: "mx", SMTP_RELAY_URL: "smtp://relay.example:25" }, "SMTP_RELAY_URL is set but DELIVERY=mx"],
    [{ DELIVERY: "mx", MX_ALLOW_PRIVATE: "yes" }, "MX_ALLOW_PRIVATE"],
  ])("worker %p is refused with its name", (env, name) => {
    expect(() => workerConfig(env)).toThrow(ConfigError);
    expect(() => workerConfig(env)).toThrow(name);
  });

  test.each([
    [{ MX_HELO_NAME: "not a name" }, "MX_HELO_NAME"],
    [{ MX_HELO_NAME: "-bad.example" }, "MX_HELO_NAME"],
    [{ MX_SHAPING_FILE: "/nonexistent/shaping.json" }, "MX_SHAPING_FILE"],
    [{ MX_PORT: "70000" }, "MX_PORT"],
    [{ MX_TRUSTED_CA: "/nonexistent/ca.pem" }, "MX_TRUSTED_CA"],
    [{ MX_REPLY_TIMEOUT_MS: "10" }, "MX_REPLY_TIMEOUT_MS"],
  ])("%p is refused with its name", (env, name) => {
    expect(() => mxConfig(env)).toThrow(ConfigError);
    expect(() => mxConfig(env)).toThrow(name);
  });
});
