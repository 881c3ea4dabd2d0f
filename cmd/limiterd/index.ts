// limiterd: the central daemon. Admission, the directory and health over Connect/gRPC.
import { systemClock } from "../../internal/clock/clock";
import { limiterdConfig, loadOrExit } from "../../internal/config/config";
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

const server = await serveRpc(limiterRoutes({ store, clock: systemClock, newToken }), cfg.host, cfg.port);
log.info("listening", { addr: `${cfg.host}:${server.port}`, store: cfg.redisUrl ? "redis" : `embedded (${cfg.dataDir})` });

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    log.info("stopping", { signal });
    await Promise.race([server.close(), Bun.sleep(2_000)]);
    await store.close();
    process.exit(0);
  });
}
