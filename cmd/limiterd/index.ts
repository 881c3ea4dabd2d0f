// limiterd: the central daemon. Admission, the directory, sending, the lane schedulers
// and the workers' leases, over Connect/gRPC.
import type { ConnectRouter } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { systemClock } from "../../internal/clock/clock";
import { limiterdConfig, loadOrExit } from "../../internal/config/config";
import { startLanes } from "../../internal/lanes/lanes";
import { MailRuntime, mailRoutes } from "../../internal/limiter/mail_service";
import { serveRpc } from "../../internal/limiter/server";
import { limiterRoutes } from "../../internal/limiter/service";
import { logger } from "../../internal/log/log";
import { EmbeddedStore } from "../../internal/store/embedded";
import { connectRedis, RedisStore } from "../../internal/store/redis";
import type { Store } from "../../internal/store/store";
import { newToken } from "../../internal/token/token";

const log = logger("limiterd");
const cfg = loadOrExit("limiterd", () => limiterdConfig(process.env));

let store: Store;
try {
  store = cfg.redisUrl ? new RedisStore(await connectRedis(cfg.redisUrl)) : new EmbeddedStore(cfg.dataDir);
} catch (err) {
  log.error("cannot open the store", { store: cfg.redisUrl ? "redis" : "embedded", error: (err as Error).message });
  process.exit(1);
}

const clock = systemClock;
const runtime = new MailRuntime();
const policy = { maxAttempts: cfg.maxAttempts, retryBaseMs: cfg.retryBaseMs, bounceCooldownMs: cfg.bounceCooldownMs, retentionMs: cfg.retentionMs };
const mail = mailRoutes({ store, clock, laneRate: cfg.laneRate, visibilityMs: cfg.visibilityMs, policy }, runtime);
const directory = limiterRoutes({ store, clock, newToken });
const server = await serveRpc(
  (router: ConnectRouter) => {
    directory(router);
    mail(router);
  },
  cfg.host,
  cfg.port,
);
const lanes = startLanes({
  store,
  clock,
  ratePerSecond: cfg.laneRate,
  owner: `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`,
  policy,
  onRelease: (r) => runtime.recordRelease(r),
  onRecovered: () => runtime.work.notifyAll(),
  log,
});
log.info("listening", { addr: `${cfg.host}:${server.port}`, store: cfg.redisUrl ? "redis" : `embedded (${cfg.dataDir})`, laneRate: cfg.laneRate });

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    log.info("stopping", { signal });
    await lanes.stop();
    await Promise.race([server.close(), Bun.sleep(2_000)]);
    await store.close();
    process.exit(0);
  });
}
