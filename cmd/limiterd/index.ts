// limiterd: the central daemon. Admission, the directory, sending, the lane schedulers and the
// workers' leases, over Connect/gRPC; records in SQL, hot state in Redis or embedded.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../internal/clock/clock";
import { limiterdConfig, loadOrExit } from "../../internal/config/config";
import { privateDataDir } from "../../internal/datadir/datadir";
import { ensureMasterKeyFile, MasterKey } from "../../internal/dkim/seal";
import { EmbeddedHot, embeddedHotFile } from "../../internal/hotstore/embedded/embedded";
import type { HotStore } from "../../internal/hotstore/hotstore";
import {
  connectRedis,
  connectRedisCluster,
  RedisHot,
  waitingCommandTimeoutMs,
} from "../../internal/hotstore/redis/redis";
import { limiterDaemon } from "../../internal/daemon/daemon";
import { daemonInterceptors } from "../../internal/daemon/observe";
import { serveRpc } from "../../internal/daemon/server";
import { roleGate } from "../../internal/plane/roles";
import { ensurePlaneSecret } from "../../internal/plane/secret";
import { logger, setLogFormat } from "../../internal/log/log";
import { laneName } from "../../internal/mail/policy";
import { DiskSpace } from "../../internal/diskspace/diskspace";
import {
  certificateExpiry,
  diskFullCounter,
  limiterMetrics,
  newRegistry,
  serveMetrics,
} from "../../internal/metrics/metrics";
import { Records, sqliteRecordsFile } from "../../internal/records/records";
import { exitGracefully } from "../../internal/shutdown/shutdown";
import { webhookRetryPolicy } from "../../internal/webhooks/schedule";
import { retryPolicy } from "../../internal/mx/retry";

const log = logger("limiterd");
const cfg = loadOrExit("limiterd", () => limiterdConfig(process.env));
setLogFormat(cfg.logFormat);
privateDataDir(cfg.dataDir, log);

let records: Records;
let hot: HotStore;
try {
  records = await Records.open({ databaseUrl: cfg.databaseUrl, sqliteFile: sqliteRecordsFile(cfg.dataDir) });
} catch (err) {
  log.error("cannot open the records", {
    where: cfg.databaseUrl ? "DATABASE_URL" : sqliteRecordsFile(cfg.dataDir),
    error: (err as Error).message,
  });
  process.exit(1);
}
const hotKind = cfg.redisClusterNodes
  ? "redis cluster"
  : cfg.redisUrl
    ? "redis"
    : `embedded (${embeddedHotFile(cfg.dataDir)})`;
try {
  const { redisClusterNodes: nodes, redisUrl: url, redisSentinel: sentinel } = cfg;
  // Two connections: admission's, and the one where the changes of messages wait for replicas.
  const connect = (commandTimeoutMs?: number) =>
    nodes
      ? connectRedisCluster(nodes, { commandTimeoutMs })
      : connectRedis(sentinel ?? url!, { tlsCa: cfg.redisTlsCa, commandTimeoutMs });
  if (nodes || url) {
    const waiting =
      cfg.redisWait.replicas === 0
        ? undefined
        : { policy: cfg.redisWait, writer: await connect(waitingCommandTimeoutMs(cfg.redisWait.timeoutMs)) };
    const redis = new RedisHot(await connect(), waiting);
    await redis.ready();
    log.info("waiting for replicas", {
      replicas: redis.waitingFor(),
      setting: cfg.redisWait.replicas,
      timeoutMs: cfg.redisWait.timeoutMs,
    });
    // A failover's new primary is counted afresh (0 until a replica connects); a first look
    // that failed is corrected by the next.
    redis.watchWaiting((replicas) => log.info("waiting for replicas", { replicas, setting: cfg.redisWait.replicas }));
    hot = redis;
  } else hot = new EmbeddedHot(embeddedHotFile(cfg.dataDir));
} catch (err) {
  log.error("cannot open the hot store", { store: hotKind, error: (err as Error).message });
  process.exit(1);
}
if (existsSync(join(cfg.dataDir, "mailcore.db"))) {
  log.warn(
    "DATA_DIR holds mailcore.db of mailcore 0.1, which this version does not read (records are in records.db, hot state in hot.db)",
  );
}
if ((cfg.redisUrl || cfg.redisClusterNodes) && !cfg.databaseUrl) {
  log.warn(
    "records in the SQLite file under DATA_DIR: run one daemon only; set DATABASE_URL (PostgreSQL) to run several",
    { records: records.db.where },
  );
}

if (cfg.webhookScheduleDivisor !== 1) {
  log.warn("WEBHOOK_SCHEDULE_DIVISOR shortens the webhook retry schedule and disable window: for tests only", {
    divisor: cfg.webhookScheduleDivisor,
  });
}

if (cfg.retryScheduleDivisor !== 1) {
  log.warn("RETRY_SCHEDULE_DIVISOR shortens the retry schedule in hours of MX delivery: for tests only", {
    divisor: cfg.retryScheduleDivisor,
  });
}

if (cfg.insecure && !cfg.tls) {
  log.warn(
    "LIMITER_INSECURE=1: cleartext, and every RPC is served to anyone who reaches the port with the plane secret; set LIMITER_TLS_CERT, LIMITER_TLS_KEY and LIMITER_TLS_CLIENT_CA for mutual TLS",
    { addr: `${cfg.host}:${cfg.port}` },
  );
}

// The master key (every daemon's secrets derive from it) and, on a cleartext port, the plane
// secret every caller must send: both made in DATA_DIR on the first start when not given.
let masterKey: MasterKey;
let planeSecret: string | undefined;
try {
  masterKey = cfg.masterKey
    ? MasterKey.fromBase64(cfg.masterKey, "DKIM_MASTER_KEY")
    : ensureMasterKeyFile(cfg.dataDir).key;
  planeSecret = cfg.tls ? undefined : ensurePlaneSecret(cfg.dataDir);
} catch (err) {
  log.error("cannot read or make a secret under DATA_DIR", { dataDir: cfg.dataDir, error: (err as Error).message });
  process.exit(1);
}

const registry = newRegistry("limiterd");
certificateExpiry(registry, { LIMITER_TLS_CERT: cfg.tls?.cert, LIMITER_TLS_CLIENT_CA: cfg.tls?.clientCa });
const metrics = limiterMetrics(registry, {
  lanes: async () =>
    (await hot.mail.laneCounts(systemClock.nowMs())).map((c) => ({
      lane: laneName(c.lane),
      depth: c.depth,
      oldestAgeMs: c.oldestAgeMs,
    })),
  ready: () => hot.lifecycle.ping().then(() => true),
});
// The SQLite files under DATA_DIR (records, embedded hot store): a full disk refuses the calls
// that write (UNAVAILABLE: the API answers 503, the worker retries its acks) until there is space.
const disk = new DiskSpace(cfg.dataDir, log, diskFullCounter(registry));
const daemon = limiterDaemon({
  hot,
  records,
  clock: systemClock,
  laneRate: cfg.laneRate,
  visibilityMs: cfg.visibilityMs,
  reconcileEveryMs: cfg.reconcileEveryMs,
  policy: { maxAttempts: cfg.maxAttempts, retryBaseMs: cfg.retryBaseMs, bounceCooldownMs: cfg.bounceCooldownMs },
  retryInHours: retryPolicy(cfg.maxRetryHours, cfg.retryScheduleDivisor),
  retentionMs: cfg.retentionMs,
  webhookPolicy: webhookRetryPolicy(cfg.webhookScheduleDivisor),
  dnsServer: cfg.dnsServer,
  publicUrl: cfg.publicUrl,
  ipv6PrefixBits: cfg.ipv6PrefixBits,
  consoleIdleMs: cfg.consoleIdleMs,
  queueCap: cfg.queueCap,
  owner: `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`,
  log,
  metrics,
  ticketKey: masterKey.derive("plane-ticket"),
  returnPathKey: masterKey.derive("return-path"),
  trackingKey: masterKey.derive("tracking"),
  disk,
});
const server = await serveRpc((router) => daemon.routes(router), cfg.host, cfg.port, {
  interceptors: [...daemon.interceptors, ...daemonInterceptors({ log, disk })],
  raw: daemon.raw,
  secret:
    planeSecret === undefined
      ? undefined
      : { value: planeSecret, refused: (rpc) => log.warn("refused an RPC: no plane secret", { rpc }) },
  tls: cfg.tls && {
    ...cfg.tls,
    authorize: roleGate(log),
    handshakeRefused: (err, from) => log.warn("refused a client at the TLS handshake", { from, error: err.message }),
  },
});
daemon.start();
const metricsServer = serveMetrics(registry, cfg.metricsHost, cfg.metricsPort, log);
log.info("listening", {
  addr: `${cfg.host}:${server.port}`,
  tls: cfg.tls ? "mutual TLS, an RPC to its role only" : "cleartext, calls with the plane secret only",
  hot: hotKind,
  records: records.db.where,
  laneRate: cfg.laneRate,
});

// Stop releasing, end the lease streams (the leases stay with their workers), let the calls
// under way finish, write what is left to the records, then close the stores.
exitGracefully(log, async () => {
  await daemon.stopReleasing();
  await server.close(7_000);
  metricsServer.stop();
  await daemon.stop();
  disk.stop();
  await hot.lifecycle.close();
  await records.close();
});
