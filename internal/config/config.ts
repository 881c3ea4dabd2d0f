import { readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { hostname } from "node:os";
import { resolve } from "node:path";
import { createSecureContext } from "node:tls";
import { IPV6_PREFIX_BITS_DEFAULT } from "../clientip/clientip";
import { type ClientCredential, clientCredential } from "../plane/secret";
import type { ClientTls, ServerTls } from "../plane/tls";

// Configuration comes from environment variables, each with a default, all validated at
// start. A bad value is a ConfigError; the process prints its one line and exits 2.

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function raw(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === "" ? undefined : v.trim();
}

export function intVar(env: Env, name: string, def: number, min: number, max: number): number {
  const v = raw(env, name);
  if (v === undefined) return def;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new ConfigError(`${name}=${JSON.stringify(v)} is not a whole number from ${min} to ${max}`);
  }
  return Number(v);
}

/** IPV6_PREFIX_BITS: how many leading bits of an IPv6 client address every per-address limit counts by. */
export function ipv6PrefixBitsVar(env: Env): number {
  return intVar(env, "IPV6_PREFIX_BITS", IPV6_PREFIX_BITS_DEFAULT, 32, 128);
}

export function portVar(env: Env, name: string, def: number): number {
  return intVar(env, name, def, 1, 65_535);
}

export function urlVar(env: Env, name: string, def: string | undefined, schemes: string[]): string | undefined {
  const v = raw(env, name) ?? def;
  if (v === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new ConfigError(`${name}=${JSON.stringify(v)} is not a URL`);
  }
  if (!schemes.includes(url.protocol.slice(0, -1))) {
    throw new ConfigError(`${name}=${JSON.stringify(v)} must use ${schemes.map((s) => `${s}://`).join(" or ")}`);
  }
  return v;
}

export function hostVar(env: Env, name: string, def: string): string {
  const v = raw(env, name) ?? def;
  if (isIP(v) === 0 && v !== "localhost")
    throw new ConfigError(`${name}=${JSON.stringify(v)} is not an IP address to listen on`);
  return v;
}

export function ipListVar(env: Env, name: string): string[] {
  const v = raw(env, name);
  if (v === undefined) return [];
  const ips = v.split(",").map((s) => s.trim());
  const bad = ips.find((ip) => isIP(ip) === 0);
  if (bad !== undefined)
    throw new ConfigError(
      `${name} holds ${JSON.stringify(bad)}, which is not an IP address (give a comma-separated list of proxy IPs)`,
    );
  return ips;
}

/** A comma-separated list of host:port. */
export function hostPortListVar(env: Env, name: string): string[] | undefined {
  const v = raw(env, name);
  if (v === undefined) return undefined;
  const items = v.split(",").map((s) => s.trim());
  const bad = items.find((item) => {
    const m = /^(.+):(\d{1,5})$/.exec(item);
    return !m || Number(m[2]) < 1 || Number(m[2]) > 65_535 || /[\s/]/.test(m[1]!);
  });
  if (bad !== undefined)
    throw new ConfigError(`${name} holds ${JSON.stringify(bad)}, which is not host:port (give a comma-separated list)`);
  return items;
}

export function dirVar(env: Env, name: string, def: string): string {
  return resolve(raw(env, name) ?? def);
}

export function logFormatVar(env: Env): "json" | "pretty" {
  const v = raw(env, "LOG_FORMAT") ?? "json";
  if (v !== "json" && v !== "pretty") throw new ConfigError(`LOG_FORMAT=${JSON.stringify(v)} must be json or pretty`);
  return v;
}

/** The one line a process prints for a bad configuration value. */
export function configErrorLine(process_: string, err: ConfigError): string {
  return `${process_}: configuration error: ${err.message}`;
}

/** Runs a config loader; on a bad value prints one line and exits with code 2. */
export function loadOrExit<T>(process_: string, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${configErrorLine(process_, err)}\n`);
    process.exit(2);
  }
}

/** A Redis primary found through Sentinel: REDIS_URL=redis+sentinel://[:password@]host:port[,host:port...]/<master name>. */
export interface RedisSentinel {
  sentinels: { host: string; port: number }[];
  name: string;
  /** The primary's password (the sentinels are asked without one). */
  password: string | undefined;
}

/** How many replicas a change of a message waits for ("detect": 1 when the primary has one), and how long. */
export interface RedisWaitConfig {
  replicas: number | "detect";
  timeoutMs: number;
}

/**
 * REDIS_WAIT_TIMEOUT_MS's default: well under the fronts' 1 s deadline on the daemon
 * (LIMITER_TIMEOUT_MS), so a send the replicas do not confirm is answered 503 by the daemon
 * itself, yet two orders of magnitude above a replica's acknowledgement on a healthy network.
 */
export const REDIS_WAIT_TIMEOUT_DEFAULT_MS = 250;

export interface LimiterdConfig {
  dataDir: string;
  /** REDIS_URL as given: redis://, rediss:// or redis+sentinel:// (then redisSentinel says where). */
  redisUrl: string | undefined;
  redisSentinel: RedisSentinel | undefined;
  /** REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT_MS. */
  redisWait: RedisWaitConfig;
  /** REDIS_TLS_CA: the CA that verifies a rediss:// server; undefined: the system's CAs. */
  redisTlsCa: Buffer | undefined;
  /** Seed nodes of a Redis Cluster for the hot store (instead of redisUrl). */
  redisClusterNodes: string[] | undefined;
  /** PostgreSQL for the records; unset: a SQLite file under dataDir. */
  databaseUrl: string | undefined;
  host: string;
  port: number;
  /** Releases per second of each lane. */
  laneRate: number;
  bounceCooldownMs: number;
  visibilityMs: number;
  /** How often the records are reconciled with the hot store (messages it lost are put back). */
  reconcileEveryMs: number;
  /** The short retry schedule (the relay, the file sink): attempts at most, and the first wait (doubling). */
  maxAttempts: number;
  retryBaseMs: number;
  /** The schedule in hours (MX delivery): how long a message is tried after its first attempt. */
  maxRetryHours: number;
  /** Divides the schedule in hours: tests only (1 in production). */
  retryScheduleDivisor: number;
  retentionMs: number;
  /** Divides the webhook retry schedule and disable window: tests only (1 in production). */
  webhookScheduleDivisor: number;
  logFormat: "json" | "pretty";
  metricsHost: string;
  /** 0: no metrics endpoint. */
  metricsPort: number;
  /** Where domain verification sends its DNS queries; undefined: the system's resolvers. */
  dnsServer: string | undefined;
  /** Where links in mail (one-click unsubscribe) point: the API process as the world reaches it. */
  publicUrl: string;
  /** The IPv6 prefix every per-address limit counts a client by (the IP bucket, the console's sign-in). */
  ipv6PrefixBits: number;
  /** A console session unused this long has ended (it ends 12 hours after sign-in in any case). */
  consoleIdleMs: number;
  /** The most one organization may have queued: messages not yet final, and their bytes. */
  queueCap: { messages: number; bytes: number };
  /** Mutual TLS on the daemon's port; undefined: cleartext. */
  tls: ServerTls | undefined;
  /** LIMITER_INSECURE=1: cleartext on an address other than loopback, for a network isolated by other means. */
  insecure: boolean;
  /**
   * DKIM_MASTER_KEY as given (checked: the base64 of 32 bytes; limiterd reads it with
   * internal/dkim's MasterKey); undefined: the key in DATA_DIR/dkim-master.key, made on the first start.
   */
  masterKey: string | undefined;
  /** How the sending domains' records are made and checked. */
  domains: DomainsConfig;
}

export interface DomainsConfig {
  /** RETURN_PATH_SUBDOMAIN: the label of the return path under each From domain. */
  returnPathSubdomain: string;
  /** SPF_INCLUDE: the domain whose SPF record lists the platform's sending hosts. */
  spfInclude: string;
  /** INBOUND_MX_HOST: the platform's host that receives bounces (the return path's MX). */
  inboundHost: string;
  /** DKIM_ED25519=1: an Ed25519 key (and signature) beside the RSA one. */
  ed25519: boolean;
  /** DOMAIN_RECHECK_S: how often every domain's records are checked again. */
  recheckMs: number;
}

/** Whether an address LIMITER_HOST may take is reachable from this host only. */
function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || (isIP(host) === 4 && host.startsWith("127."));
}

const SENTINEL_SCHEME = "redis+sentinel://";

/** redis+sentinel://[:password@]host:port[,host:port...]/<master name> */
function sentinelUrl(v: string): RedisSentinel {
  const bad = (why: string) =>
    new ConfigError(
      `REDIS_URL=${JSON.stringify(v)} ${why}: give redis+sentinel://[:password@]host:port[,host:port...]/<master name>`,
    );
  const m = /^redis\+sentinel:\/\/(?:([^@/]*)@)?([^/@]+)\/([^/?#]+)$/.exec(v);
  if (!m) throw bad("is not a Sentinel URL");
  const [, auth, hosts, name] = m;
  const sentinels = hosts!.split(",").map((h) => {
    const hp = /^([^\s:,]+):(\d{1,5})$/.exec(h.trim());
    if (!hp || Number(hp[2]) < 1 || Number(hp[2]) > 65_535)
      throw bad(`holds ${JSON.stringify(h)}, which is not host:port`);
    return { host: hp[1]!, port: Number(hp[2]) };
  });
  const password = auth === undefined ? undefined : decodeURIComponent(auth.slice(auth.indexOf(":") + 1));
  return { sentinels, name: decodeURIComponent(name!), password: password || undefined };
}

export function limiterdConfig(env: Env): LimiterdConfig {
  const sentinel = raw(env, "REDIS_URL")?.startsWith(SENTINEL_SCHEME) ? sentinelUrl(raw(env, "REDIS_URL")!) : undefined;
  const redisUrl = sentinel
    ? raw(env, "REDIS_URL")
    : urlVar(env, "REDIS_URL", undefined, ["redis", "rediss", "redis+sentinel"]);
  const redisClusterNodes = hostPortListVar(env, "REDIS_CLUSTER_NODES");
  if (redisUrl && redisClusterNodes)
    throw new ConfigError("set REDIS_URL (one Redis primary) or REDIS_CLUSTER_NODES (a Redis Cluster), not both");
  const redisTlsCa = pemVar(env, "REDIS_TLS_CA");
  if (redisTlsCa && !redisUrl?.startsWith("rediss:")) throw new ConfigError("REDIS_TLS_CA needs REDIS_URL=rediss://");
  const waitReplicas =
    raw(env, "REDIS_WAIT_REPLICAS") === undefined ? "detect" : intVar(env, "REDIS_WAIT_REPLICAS", 0, 0, 16);
  const redisWait: RedisWaitConfig = {
    replicas: waitReplicas,
    timeoutMs: intVar(env, "REDIS_WAIT_TIMEOUT_MS", REDIS_WAIT_TIMEOUT_DEFAULT_MS, 1, 10_000),
  };
  if (!redisUrl && !redisClusterNodes)
    for (const name of ["REDIS_WAIT_REPLICAS", "REDIS_WAIT_TIMEOUT_MS"])
      if (raw(env, name) !== undefined)
        throw new ConfigError(
          `${name} needs Redis (REDIS_URL or REDIS_CLUSTER_NODES): the embedded store has no replicas`,
        );
  const host = hostVar(env, "LIMITER_HOST", "127.0.0.1");
  const tls = limiterdTls(env);
  const insecure = intVar(env, "LIMITER_INSECURE", 0, 0, 1) === 1;
  if (!isLoopback(host) && tls === undefined && !insecure)
    throw new ConfigError(
      `LIMITER_HOST=${host} is not a loopback address, and anyone who reaches the port could call every RPC: set LIMITER_TLS_CERT, LIMITER_TLS_KEY and LIMITER_TLS_CLIENT_CA (mutual TLS), or LIMITER_INSECURE=1 on a network isolated by other means`,
    );
  return {
    dataDir: dirVar(env, "DATA_DIR", "data"),
    redisUrl,
    redisSentinel: sentinel,
    redisWait,
    redisTlsCa,
    redisClusterNodes,
    databaseUrl: databaseUrl(env),
    host,
    port: portVar(env, "LIMITER_PORT", 7070),
    laneRate: intVar(env, "LANE_RATE", 40, 1, 1_000),
    bounceCooldownMs: intVar(env, "BOUNCE_COOLDOWN_S", 3_600, 1, 365 * 86_400) * 1_000,
    visibilityMs: intVar(env, "VISIBILITY_TIMEOUT_MS", 60_000, 100, 3_600_000),
    reconcileEveryMs: intVar(env, "RECONCILE_EVERY_MS", 5_000, 100, 3_600_000),
    maxAttempts: intVar(env, "MAX_ATTEMPTS", 5, 1, 100),
    retryBaseMs: intVar(env, "RETRY_BASE_MS", 30_000, 1, 3_600_000),
    maxRetryHours: intVar(env, "MAX_RETRY_HOURS", 48, 1, 720),
    retryScheduleDivisor: intVar(env, "RETRY_SCHEDULE_DIVISOR", 1, 1, 100_000),
    retentionMs: intVar(env, "MESSAGE_RETENTION_DAYS", 30, 1, 3_650) * 86_400_000,
    webhookScheduleDivisor: intVar(env, "WEBHOOK_SCHEDULE_DIVISOR", 1, 1, 100_000),
    logFormat: logFormatVar(env),
    metricsHost: hostVar(env, "METRICS_HOST", "127.0.0.1"),
    metricsPort: intVar(env, "LIMITER_METRICS_PORT", 0, 0, 65_535),
    dnsServer: dnsServerVar(env, "DNS_SERVER"),
    publicUrl: urlVar(env, "PUBLIC_URL", "http://127.0.0.1:8080", ["http", "https"])!,
    ipv6PrefixBits: ipv6PrefixBitsVar(env),
    consoleIdleMs: intVar(env, "CONSOLE_IDLE_TIMEOUT_MINUTES", 30, 1, 720) * 60_000,
    queueCap: {
      messages: intVar(env, "MAX_QUEUED_PER_ORG", 100_000, 1, 100_000_000),
      // At least room for a few messages of the largest size, in their JSON form.
      bytes: intVar(env, "MAX_QUEUED_BYTES_PER_ORG", 256 * 1024 * 1024, 8 * 1024 * 1024, 1024 ** 4),
    },
    tls,
    insecure,
    masterKey: masterKeyVar(env),
    domains: domainsConfig(env),
  };
}

/** A host name; with underscores, a label may also start with "_" (_spf.example.com). */
const HOST_NAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const DNS_NAME = /^(?=.{1,253}$)(?:[a-z0-9_](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

function dnsNameVar(env: Env, name: string, def: string, pattern = HOST_NAME): string {
  const v = (raw(env, name) ?? def).toLowerCase().replace(/\.$/, "");
  if (!pattern.test(v)) throw new ConfigError(`${name}=${JSON.stringify(v)} is not a DNS name`);
  return v;
}

/** The domains' variables; SPF_INCLUDE and INBOUND_MX_HOST default to names under PUBLIC_URL's host. */
export function domainsConfig(env: Env): DomainsConfig {
  const publicHost = new URL(urlVar(env, "PUBLIC_URL", "http://127.0.0.1:8080", ["http", "https"])!).hostname;
  const base = isIP(publicHost) === 0 && publicHost !== "localhost" ? publicHost : "mailcore.invalid";
  return {
    returnPathSubdomain: dnsNameVar(env, "RETURN_PATH_SUBDOMAIN", "bounces"),
    spfInclude: dnsNameVar(env, "SPF_INCLUDE", `_spf.${base}`, DNS_NAME),
    inboundHost: dnsNameVar(env, "INBOUND_MX_HOST", `mx.${base}`),
    ed25519: intVar(env, "DKIM_ED25519", 0, 0, 1) === 1,
    recheckMs: intVar(env, "DOMAIN_RECHECK_S", 3_600, 10, 7 * 86_400) * 1_000,
  };
}

/**
 * DKIM_MASTER_KEY: the base64 of 32 random bytes, from which every secret of the daemons is
 * derived. Checked here without internal/dkim, which the fronts, who read this file too, never load.
 */
function masterKeyVar(env: Env): string | undefined {
  const v = raw(env, "DKIM_MASTER_KEY");
  if (v === undefined) return undefined;
  if (!/^[A-Za-z0-9+/]{43}=$/.test(v) || Buffer.from(v, "base64").toString("base64") !== v)
    throw new ConfigError(
      "DKIM_MASTER_KEY must be the base64 of 32 random bytes (make one with: openssl rand -base64 32)",
    );
  return v;
}

/** A PEM file's contents, read at start. */
function pemVar(env: Env, name: string): Buffer | undefined {
  const path = existingFile(env, name);
  return path === undefined ? undefined : readFileSync(path);
}

/** Checks that TLS can use the material together; a ConfigError naming the variables when it cannot. */
function usableTls(names: string, material: { ca?: Buffer; cert: Buffer; key: Buffer }): void {
  try {
    createSecureContext(material);
  } catch (err) {
    throw new ConfigError(`${names} cannot be used together: ${(err as Error).message}`);
  }
}

/** limiterd's mutual TLS: all three variables or none. */
function limiterdTls(env: Env): ServerTls | undefined {
  const names = "LIMITER_TLS_CERT, LIMITER_TLS_KEY and LIMITER_TLS_CLIENT_CA";
  const cert = pemVar(env, "LIMITER_TLS_CERT");
  const key = pemVar(env, "LIMITER_TLS_KEY");
  const clientCa = pemVar(env, "LIMITER_TLS_CLIENT_CA");
  if (cert === undefined && key === undefined && clientCa === undefined) return undefined;
  if (cert === undefined || key === undefined || clientCa === undefined)
    throw new ConfigError(`${names} go together: set all three (PEM files) or none (cleartext on loopback)`);
  usableTls(names, { ca: clientCa, cert, key });
  return { cert, key, clientCa };
}

/**
 * A client's TLS to limiterd: with LIMITER_URL=https://, its certificate and key
 * (LIMITER_TLS_CLIENT_CERT, LIMITER_TLS_CLIENT_KEY) and the CA that verifies the daemon
 * (LIMITER_TLS_CA, else the system's); with http://, none of them.
 */
export function limiterTls(env: Env, limiterUrl: string): ClientTls | undefined {
  const names = "LIMITER_TLS_CA, LIMITER_TLS_CLIENT_CERT and LIMITER_TLS_CLIENT_KEY";
  const ca = pemVar(env, "LIMITER_TLS_CA");
  const cert = pemVar(env, "LIMITER_TLS_CLIENT_CERT");
  const key = pemVar(env, "LIMITER_TLS_CLIENT_KEY");
  if (!limiterUrl.startsWith("https:")) {
    if (ca || cert || key) throw new ConfigError(`${names} need LIMITER_URL=https://host:port`);
    return undefined;
  }
  if (cert === undefined || key === undefined)
    throw new ConfigError(
      "LIMITER_URL=https:// needs LIMITER_TLS_CLIENT_CERT and LIMITER_TLS_CLIENT_KEY: limiterd takes no client without a certificate",
    );
  usableTls(names, { ca, cert, key });
  return { ca, cert, key };
}

/** A DNS server: an IP address, optionally with a port (1.2.3.4:53, [::1]:5353). */
export function dnsServerVar(env: Env, name: string): string | undefined {
  const v = raw(env, name);
  if (v === undefined) return undefined;
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(v) ?? /^([^:]+):(\d+)$/.exec(v) ?? ([v, v, "53"] as const);
  const [, host, port] = m;
  if (isIP(host!) === 0 || Number(port) < 1 || Number(port) > 65_535) {
    throw new ConfigError(
      `${name}=${JSON.stringify(v)} is not a DNS server address (an IP, optionally with a port: 192.0.2.53:53 or [2001:db8::53]:53)`,
    );
  }
  return v;
}

/** Where the records are: DATABASE_URL (PostgreSQL), or undefined for the SQLite file under DATA_DIR. */
export function databaseUrl(env: Env): string | undefined {
  return urlVar(env, "DATABASE_URL", undefined, ["postgres", "postgresql"]);
}

/**
 * How a client proves itself to limiterd: on https:// its certificate (limiterTls), on http://
 * the plane secret in DATA_DIR (plane.secret, made by limiterd), which the client reads there.
 */
export function limiterCredential(env: Env): ClientCredential {
  return clientCredential(limiterTls(env, limiterUrl(env)), dirVar(env, "DATA_DIR", "data"));
}

export function limiterUrl(env: Env): string {
  return urlVar(env, "LIMITER_URL", "http://127.0.0.1:7070", ["http", "https"])!;
}

export interface ApiConfig {
  host: string;
  port: number;
  limiterUrl: string;
  limiterTls: ClientTls | undefined;
  /** The certificate (mutual TLS) or, on http://, the plane secret under DATA_DIR. */
  limiterCredential: ClientCredential;
  limiterTimeoutMs: number;
  /**
   * The deadline of a record-bound call (audience, campaigns, workflows, webhooks): a batch of
   * 1,000 upserts is a larger write than an admission. The daemon commits by then or not at all,
   * so a call past it answers 503 with nothing written; 5 s by default, well above such a batch
   * and below the timeouts HTTP clients commonly give up at, so the client learns the outcome.
   */
  audienceTimeoutMs: number;
  trustProxy: string[];
  docsUrl: string | undefined;
  /** Threads that validate send bodies (addresses, Markdown) off the event loop. */
  validationWorkers: number;
  /** A body whose validation takes longer is refused (422) and its thread replaced. */
  validationTimeoutMs: number;
  logFormat: "json" | "pretty";
  metricsHost: string;
  /** 0: no metrics endpoint. */
  metricsPort: number;
}

export function apiConfig(env: Env): ApiConfig {
  return {
    host: hostVar(env, "API_HOST", "127.0.0.1"),
    port: portVar(env, "API_PORT", 8080),
    limiterUrl: limiterUrl(env),
    limiterTls: limiterTls(env, limiterUrl(env)),
    limiterCredential: limiterCredential(env),
    limiterTimeoutMs: intVar(env, "LIMITER_TIMEOUT_MS", 1_000, 10, 60_000),
    audienceTimeoutMs: intVar(env, "AUDIENCE_TIMEOUT_MS", 5_000, 1_000, 120_000),
    trustProxy: ipListVar(env, "TRUST_PROXY"),
    docsUrl: urlVar(env, "DOCS_URL", undefined, ["http", "https"]),
    validationWorkers: intVar(env, "API_VALIDATION_WORKERS", 2, 1, 64),
    validationTimeoutMs: intVar(env, "API_VALIDATION_TIMEOUT_MS", 2_000, 100, 60_000),
    logFormat: logFormatVar(env),
    metricsHost: hostVar(env, "METRICS_HOST", "127.0.0.1"),
    metricsPort: intVar(env, "API_METRICS_PORT", 0, 0, 65_535),
  };
}

/** Where a worker delivers: the recipients' MX hosts, one relay, or files under DATA_DIR/sink. */
export type DeliveryKind = "mx" | "relay" | "file";

export interface WorkerConfig {
  dataDir: string;
  limiterUrl: string;
  limiterTls: ClientTls | undefined;
  /** As ApiConfig's. */
  limiterCredential: ClientCredential;
  /** DELIVERY; unset: relay when SMTP_RELAY_URL is set, else file. */
  delivery: DeliveryKind;
  relayUrl: string | undefined;
  /** For DELIVERY=mx. */
  mx: MxConfig | undefined;
  maxInFlight: number;
  /** Webhook attempts under way at once, apart from the mail deliveries. */
  webhookConcurrency: number;
  /** Whether webhooks may be sent to loopback and private networks (development, tests). */
  webhookAllowPrivateUrls: boolean;
  /** Where webhook hosts, MX hosts and MTA-STS policies are looked up; undefined: the system's resolvers. */
  dnsServer: string | undefined;
  metricsHost: string;
  /** 0: no metrics endpoint. */
  metricsPort: number;
  logFormat: "json" | "pretty";
}

/** DELIVERY: mx, relay or file; unset, relay when a relay is set and file otherwise. */
function deliveryVar(env: Env, relayUrl: string | undefined): DeliveryKind {
  const v = raw(env, "DELIVERY");
  if (v === undefined) return relayUrl ? "relay" : "file";
  if (v !== "mx" && v !== "relay" && v !== "file")
    throw new ConfigError(`DELIVERY=${JSON.stringify(v)} must be mx, relay or file`);
  if (v === "relay" && !relayUrl) throw new ConfigError("DELIVERY=relay needs SMTP_RELAY_URL");
  if (v !== "relay" && relayUrl) throw new ConfigError(`SMTP_RELAY_URL is set but DELIVERY=${v}: unset one of them`);
  return v;
}

export function workerConfig(env: Env): WorkerConfig {
  const relayUrl = urlVar(env, "SMTP_RELAY_URL", undefined, ["smtp", "smtps"]);
  const delivery = deliveryVar(env, relayUrl);
  return {
    dataDir: dirVar(env, "DATA_DIR", "data"),
    limiterUrl: limiterUrl(env),
    limiterTls: limiterTls(env, limiterUrl(env)),
    limiterCredential: limiterCredential(env),
    delivery,
    relayUrl,
    mx: delivery === "mx" ? mxConfig(env) : undefined,
    // MX delivery waits on many receivers at once (a delivery takes a round trip or five to a
    // far host), a relay on one nearby.
    maxInFlight: intVar(env, "WORKER_CONCURRENCY", delivery === "mx" ? 128 : 16, 1, 256),
    webhookConcurrency: intVar(env, "WEBHOOK_CONCURRENCY", 64, 1, 1_024),
    webhookAllowPrivateUrls: intVar(env, "WEBHOOK_ALLOW_PRIVATE_URLS", 0, 0, 1) === 1,
    dnsServer: dnsServerVar(env, "DNS_SERVER"),
    metricsHost: hostVar(env, "METRICS_HOST", "127.0.0.1"),
    metricsPort: intVar(env, "WORKER_METRICS_PORT", 0, 0, 65_535),
    logFormat: logFormatVar(env),
  };
}

/** Delivery to the recipients' MX hosts. */
export interface MxConfig {
  /** Our name in EHLO: a name whose A record and PTR match the sending address, as receivers check. */
  heloName: string;
  /** The port every MX is reached on (25; tests use another). */
  port: number;
  /** The per-destination shaping file (MX_SHAPING_FILE); undefined: the repository's default. Loaded and checked by internal/mx's loadShaping, whose error is a ConfigError. */
  shapingFile: string | undefined;
  /** MX_ALLOW_PRIVATE=1: MX hosts (and MTA-STS policy hosts) on private, loopback or link-local addresses are used (tests, a closed network). */
  allowPrivate: boolean;
  /** MX_TRUSTED_CA: CAs trusted besides the system's for verified TLS and MTA-STS policy fetches (tests, a private network). */
  trustedCa: Buffer | undefined;
  /** A session's deadlines: connecting and setting up (greeting, EHLO, STARTTLS), a reply's silence, a whole message. */
  timeouts: { setupMs: number; replyMs: number; messageMs: number };
}

export function mxConfig(env: Env): MxConfig {
  const heloName = raw(env, "MX_HELO_NAME") ?? hostname();
  if (
    !/^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(
      heloName,
    )
  )
    throw new ConfigError(`MX_HELO_NAME=${JSON.stringify(heloName)} is not a host name`);
  return {
    heloName,
    port: portVar(env, "MX_PORT", 25),
    shapingFile: existingFile(env, "MX_SHAPING_FILE"),
    allowPrivate: intVar(env, "MX_ALLOW_PRIVATE", 0, 0, 1) === 1,
    trustedCa: pemVar(env, "MX_TRUSTED_CA"),
    timeouts: {
      setupMs: intVar(env, "MX_SETUP_TIMEOUT_MS", 30_000, 100, 600_000),
      replyMs: intVar(env, "MX_REPLY_TIMEOUT_MS", 60_000, 100, 600_000),
      messageMs: intVar(env, "MX_MESSAGE_TIMEOUT_MS", 300_000, 100, 3_600_000),
    },
  };
}

export interface SmtpConfig {
  host: string;
  port: number;
  /** Both set (files that exist) or both undefined: a self-signed certificate under dataDir/tls. */
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  apiUrl: string;
  limiterUrl: string;
  limiterTls: ClientTls | undefined;
  /** As ApiConfig's. */
  limiterCredential: ClientCredential;
  limiterTimeoutMs: number;
  dataDir: string;
  maxClients: number;
  /** Idle time allowed between two commands, or between two chunks of DATA. */
  socketTimeoutMs: number;
  /** Longest a connection may stay open; it is then closed with a 421 after its current reply. */
  sessionTimeoutMs: number;
  /** Deadline of the forward to POST /api/v1/emails; past it the message gets a 451. */
  apiTimeoutMs: number;
  logFormat: "json" | "pretty";
  metricsHost: string;
  /** 0: no metrics endpoint. */
  metricsPort: number;
  /** Unauthenticated connections one client address may hold at once. */
  maxClientsPerIp: number;
  /** Connections of one address above maxClientsPerIp held before their greeting until a slot frees. */
  maxWaitingPerIp: number;
  /** Authenticated sessions one organization may hold at once. */
  maxSessionsPerOrg: number;
  /** A connection without a successful AUTH this long after its greeting is closed (421); also the longest wait for a slot. */
  authTimeoutMs: number;
  authFailuresPerIp: number;
  /** The IPv6 prefix the per-address limits count a client by. */
  ipv6PrefixBits: number;
}

function existingFile(env: Env, name: string): string | undefined {
  const v = raw(env, name);
  if (v === undefined) return undefined;
  const path = resolve(v);
  let ok = false;
  try {
    ok = statSync(path).isFile();
  } catch {
    ok = false;
  }
  if (!ok) throw new ConfigError(`${name}=${JSON.stringify(v)} is not a readable file`);
  return path;
}

export function smtpConfig(env: Env): SmtpConfig {
  const tlsCert = existingFile(env, "SMTP_TLS_CERT");
  const tlsKey = existingFile(env, "SMTP_TLS_KEY");
  if ((tlsCert === undefined) !== (tlsKey === undefined)) {
    throw new ConfigError(
      "SMTP_TLS_CERT and SMTP_TLS_KEY go together: set both (PEM files) or neither (a self-signed development certificate)",
    );
  }
  const host = hostVar(env, "SMTP_HOST", "127.0.0.1");
  const allowSelfSigned = intVar(env, "SMTP_ALLOW_SELF_SIGNED", 0, 0, 1) === 1;
  // A client cannot tell a self-signed certificate from an attacker's: off loopback, it would be
  // told to send its API token over a STARTTLS anyone on the path can intercept.
  if (tlsCert === undefined && !isLoopback(host) && !allowSelfSigned)
    throw new ConfigError(
      `SMTP_HOST=${host} is not a loopback address, and without SMTP_TLS_CERT and SMTP_TLS_KEY the front would offer a self-signed certificate no client can verify: set both (PEM files), or SMTP_ALLOW_SELF_SIGNED=1 to serve it anyway`,
    );
  return {
    host,
    port: portVar(env, "SMTP_PORT", 587),
    tlsCert,
    tlsKey,
    apiUrl: urlVar(env, "API_URL", "http://127.0.0.1:8080", ["http", "https"])!,
    limiterUrl: limiterUrl(env),
    limiterTls: limiterTls(env, limiterUrl(env)),
    limiterCredential: limiterCredential(env),
    limiterTimeoutMs: intVar(env, "LIMITER_TIMEOUT_MS", 1_000, 10, 60_000),
    dataDir: dirVar(env, "DATA_DIR", "data"),
    maxClients: intVar(env, "SMTP_MAX_CLIENTS", 1_000, 1, 100_000),
    socketTimeoutMs: intVar(env, "SMTP_SOCKET_TIMEOUT_MS", 60_000, 100, 3_600_000),
    sessionTimeoutMs: intVar(env, "SMTP_SESSION_TIMEOUT_MS", 300_000, 1_000, 86_400_000),
    apiTimeoutMs: intVar(env, "SMTP_API_TIMEOUT_MS", 10_000, 100, 300_000),
    logFormat: logFormatVar(env),
    metricsHost: hostVar(env, "METRICS_HOST", "127.0.0.1"),
    metricsPort: intVar(env, "SMTP_METRICS_PORT", 0, 0, 65_535),
    maxClientsPerIp: intVar(env, "SMTP_MAX_CLIENTS_PER_IP", 10, 1, 100_000),
    maxWaitingPerIp: intVar(env, "SMTP_MAX_WAITING_PER_IP", 100, 0, 100_000),
    maxSessionsPerOrg: intVar(env, "SMTP_MAX_SESSIONS_PER_ORG", 200, 1, 100_000),
    authTimeoutMs: intVar(env, "SMTP_AUTH_TIMEOUT_MS", 10_000, 100, 3_600_000),
    authFailuresPerIp: intVar(env, "SMTP_AUTH_FAILURES_PER_IP", 10, 1, 1_000_000),
    ipv6PrefixBits: ipv6PrefixBitsVar(env),
  };
}

export interface InboundConfig {
  host: string;
  /** INBOUND_PORT: 25, where MX records point. */
  port: number;
  /** Both set or both undefined: the self-signed certificate under dataDir/tls (an MTA's STARTTLS verifies none). */
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** FBL_ADDRESS: the feedback-loop addresses (lower case) that take complaints besides the return paths. */
  fblAddresses: string[];
  limiterUrl: string;
  limiterTls: ClientTls | undefined;
  limiterCredential: ClientCredential;
  limiterTimeoutMs: number;
  dataDir: string;
  maxClients: number;
  maxClientsPerIp: number;
  maxWaitingPerIp: number;
  socketTimeoutMs: number;
  sessionTimeoutMs: number;
  ipv6PrefixBits: number;
  logFormat: "json" | "pretty";
  metricsHost: string;
  metricsPort: number;
}

/** FBL_ADDRESS: comma-separated addresses; each one bare address. */
function addressList(env: Env, name: string): string[] {
  const v = raw(env, name);
  if (v === undefined) return [];
  const out = v.split(",").map((a) => a.trim().toLowerCase());
  for (const a of out)
    if (!/^[^\s@<>,]+@[^\s@<>,.]+(\.[^\s@<>,.]+)+$/.test(a))
      throw new ConfigError(`${name}: ${JSON.stringify(a)} is not an email address (comma-separated bare addresses)`);
  return out;
}

export function inboundConfig(env: Env): InboundConfig {
  const tlsCert = existingFile(env, "INBOUND_TLS_CERT");
  const tlsKey = existingFile(env, "INBOUND_TLS_KEY");
  if ((tlsCert === undefined) !== (tlsKey === undefined))
    throw new ConfigError("INBOUND_TLS_CERT and INBOUND_TLS_KEY go together: set both (PEM files) or neither");
  return {
    host: hostVar(env, "INBOUND_HOST", "0.0.0.0"),
    port: portVar(env, "INBOUND_PORT", 25),
    tlsCert,
    tlsKey,
    fblAddresses: addressList(env, "FBL_ADDRESS"),
    limiterUrl: limiterUrl(env),
    limiterTls: limiterTls(env, limiterUrl(env)),
    limiterCredential: limiterCredential(env),
    limiterTimeoutMs: intVar(env, "LIMITER_TIMEOUT_MS", 1_000, 10, 60_000),
    dataDir: dirVar(env, "DATA_DIR", "data"),
    maxClients: intVar(env, "INBOUND_MAX_CLIENTS", 1_000, 1, 100_000),
    maxClientsPerIp: intVar(env, "INBOUND_MAX_CLIENTS_PER_IP", 10, 1, 100_000),
    maxWaitingPerIp: intVar(env, "INBOUND_MAX_WAITING_PER_IP", 20, 0, 100_000),
    socketTimeoutMs: intVar(env, "INBOUND_SOCKET_TIMEOUT_MS", 60_000, 100, 3_600_000),
    sessionTimeoutMs: intVar(env, "INBOUND_SESSION_TIMEOUT_MS", 300_000, 1_000, 86_400_000),
    ipv6PrefixBits: ipv6PrefixBitsVar(env),
    logFormat: logFormatVar(env),
    metricsHost: hostVar(env, "METRICS_HOST", "127.0.0.1"),
    metricsPort: intVar(env, "INBOUND_METRICS_PORT", 0, 0, 65_535),
  };
}
