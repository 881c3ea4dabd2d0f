// The full path the hot-path benches measure: limiterd and the API of a checkout, as separate
// processes on one redis-server, with enterprise organizations (a verified sending domain each)
// enough that no quota binds.
import { join } from "node:path";
import { HealthCheckResponse_ServingStatus } from "../internal/gen/grpc/health/v1/health_pb";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { limiterClients } from "../internal/limiterclient/client";
import { clientCredential, ensurePlaneSecret } from "../internal/plane/secret";
import { freePort, pool, runBun, tempDir, waitFor } from "../internal/testkit/testkit";
import { trackDir, trackProc } from "./procs";

export interface FullPathOptions {
  /** The label of the processes in the logs and errors. */
  name: string;
  /** The checkout whose cmd/ runs. */
  root: string;
  redisUrl: string;
  /** Environment of each process besides the stack's own (a profiler's options, say). */
  env?: (process: "limiterd" | "api") => Record<string, string>;
}

/** limiterd and the API of root on the given Redis; returns once both answer. */
export async function startFullPath(o: FullPathOptions) {
  const dataDir = trackDir(tempDir(`mailcore-bench-${o.name.replace(/\W+/g, "-")}-`));
  const limiterPort = await freePort();
  const limiterUrl = `http://127.0.0.1:${limiterPort}`;
  const env = { DATA_DIR: dataDir, LIMITER_URL: limiterUrl, REDIS_URL: o.redisUrl };
  // The plane secret before limiterd starts, as the dev stack makes it: the clients here send it from their first call.
  ensurePlaneSecret(dataDir);
  const limiterd = trackProc(
    `limiterd (${o.name})`,
    runBun(join(o.root, "cmd/limiterd/index.ts"), [], {
      ...env,
      LIMITER_PORT: String(limiterPort),
      ...o.env?.("limiterd"),
    }),
  );
  const clients = limiterClients(limiterUrl, clientCredential(undefined, dataDir));
  await waitFor(
    `limiterd (${o.name})`,
    async () =>
      (await clients.health.check({}, { timeoutMs: 1_000 })).status === HealthCheckResponse_ServingStatus.SERVING,
    30_000,
  );
  const apiPort = await freePort();
  const api = trackProc(
    `api (${o.name})`,
    runBun(join(o.root, "cmd/api/index.ts"), [], {
      ...env,
      API_PORT: String(apiPort),
      TRUST_PROXY: "127.0.0.1",
      ...o.env?.("api"),
    }),
  );
  const url = `http://127.0.0.1:${apiPort}`;
  await waitFor(`api (${o.name}) /readyz`, async () => (await fetch(`${url}/readyz`)).ok, 30_000).catch((err) => {
    throw new Error(`${(err as Error).message}\napi stderr:\n${api.stderr()}`);
  });
  return { url, dataDir, clients, api, limiterd };
}

export interface Sender {
  slug: string;
  token: string;
  /** Its verified sending domain: <slug>.example. */
  domain: string;
}

/** `count` enterprise organizations named <prefix>-<i>, each with an API token and a verified sending domain. */
export function enterpriseSenders(
  clients: ReturnType<typeof limiterClients>,
  prefix: string,
  count: number,
): Promise<Sender[]> {
  return pool(count, 16, async (i) => {
    const slug = `${prefix}-${i}`;
    const domain = `${slug}.example`;
    const res = await clients.directory.createOrganization({
      slug,
      plan: Plan.ENTERPRISE,
      domains: [{ name: domain, verified: true }],
      withToken: true,
    });
    return { slug, token: res.token, domain };
  });
}
