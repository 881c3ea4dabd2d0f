// The daemon's services and the API front in this test process, on real ports, with a
// clock the test moves: for behaviour over hours and days (the recipient guards).
import type { ConnectRouter } from "@connectrpc/connect";
import { daemonDeps } from "../api/deps";
import { serveApi } from "../api/server";
import type { Clock } from "../clock/clock";
import { MailRuntime, mailRoutes } from "../limiter/mail_service";
import { serveRpc } from "../limiter/server";
import { limiterRoutes } from "../limiter/service";
import { type LimiterClients, limiterClients } from "../limiterclient/client";
import { logger } from "../log/log";
import type { DeliveryPolicy } from "../store/mail";
import type { Store } from "../store/store";
import { newToken } from "../token/token";

export interface InProcess {
  apiUrl: string;
  clients: LimiterClients;
  stop(): Promise<void>;
}

export async function startInProcess(store: Store, clock: Clock, policy: DeliveryPolicy, visibilityMs = 60_000): Promise<InProcess> {
  const runtime = new MailRuntime();
  const rpc = await serveRpc(
    (router: ConnectRouter) => {
      limiterRoutes({ store, clock, newToken })(router);
      mailRoutes({ store, clock, laneRate: 40, visibilityMs, policy }, runtime)(router);
    },
    "127.0.0.1",
    0,
  );
  const clients = limiterClients(`http://127.0.0.1:${rpc.port}`);
  const api = serveApi(daemonDeps(clients, { timeoutMs: 2_000, trustProxy: [], docsUrl: undefined, log: logger("api") }), "127.0.0.1", 0);
  return {
    apiUrl: `http://127.0.0.1:${api.port}`,
    clients,
    async stop() {
      await api.stop(true);
      await rpc.close();
    },
  };
}
