// The daemon's services and the API front in this test process, on real ports, with a
// clock the test moves: for behaviour over hours and days (the recipient guards).
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { daemonPorts } from "../api/daemon_ports";
import { serveApi } from "../api/server";
import { apiSite } from "../site/site";
import { offloadedValidation } from "../api/validation";
import type { Clock } from "../clock/clock";
import type { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { DeliveryPolicy, HotStore, QueueCap } from "../hotstore/hotstore";
import { domainsConfig } from "../config/config";
import { limiterDaemon } from "../daemon/daemon";
import { MasterKey } from "../dkim/seal";
import { serveRpc } from "../daemon/server";
import { type LimiterClients, limiterClients } from "../limiterclient/client";
import { logger } from "../log/log";
import { clientCredential, ensurePlaneSecret } from "../plane/secret";
import { Records } from "../records/records";
import { webhookRetryPolicy } from "../webhooks/schedule";
import { TICKET_HEADER } from "../wire/metadata";
import { tempDir } from "./testkit";

/**
 * The metadata of an organization-scoped call for the organization `slug`: an admission
 * ticket, got as a front gets it (a new token of the organization, admitted).
 */
export async function ticketFor(
  clients: Pick<LimiterClients, "directory" | "admitBatch">,
  slug: string,
): Promise<{ headers: Record<string, string> }> {
  const { token } = await clients.directory.createToken({ slug, name: "ticket" });
  const [admission] = await clients.admitBatch([{ token, clientIp: "192.0.2.250", withTags: false }], 5_000);
  if (!admission?.ticket) throw new Error(`no ticket for ${slug}: verdict ${admission?.verdict}`);
  return { headers: { [TICKET_HEADER]: admission.ticket } };
}

export interface InProcess {
  apiUrl: string;
  clients: LimiterClients;
  records: Records;
  /** An organization `slug` on `plan` with the verified sending domain <slug>.example: its API token and id. */
  sender(slug: string, plan: Plan): Promise<{ token: string; id: string }>;
  stop(): Promise<void>;
}

/**
 * The daemon's RPCs over the given hot store and records in memory. Its loops (lanes, records
 * writer, campaigns, workflows) run only with `running` (their timers are real, their clock is
 * the test's); otherwise the test releases.
 */
export async function startInProcess(
  hot: HotStore,
  clock: Clock,
  policy: DeliveryPolicy,
  visibilityMs = 60_000,
  opts: {
    running?: boolean;
    trustProxy?: string[];
    queueCap?: QueueCap;
    /** The daemon's master key (its derived keys sign return paths and tracking URLs); a new one when not given. */
    master?: MasterKey;
  } = {},
): Promise<InProcess> {
  const records = await Records.open({ sqliteFile: ":memory:" });
  const daemon = limiterDaemon({
    hot,
    records,
    clock,
    laneRate: 40,
    visibilityMs,
    reconcileEveryMs: 5_000,
    policy,
    retentionMs: 30 * 86_400_000,
    webhookPolicy: webhookRetryPolicy(),
    owner: "test",
    publicUrl: "http://127.0.0.1:8080",
    ipv6PrefixBits: 64,
    consoleIdleMs: 30 * 60_000,
    queueCap: opts.queueCap ?? { messages: 100_000, bytes: 256 * 1024 * 1024 },
    log: logger("limiterd"),
    ticketKey: randomBytes(32),
    master: opts.master ?? MasterKey.generate(),
    domains: domainsConfig({}),
  });
  if (opts.running) daemon.start();
  const dataDir = tempDir();
  const rpc = await serveRpc((router) => daemon.routes(router), "127.0.0.1", 0, {
    raw: daemon.raw,
    interceptors: daemon.interceptors,
    secret: { value: ensurePlaneSecret(dataDir), refused: () => {} },
  });
  const clients = limiterClients(`http://127.0.0.1:${rpc.port}`, clientCredential(undefined, dataDir));
  const validation = offloadedValidation({ workers: 1, timeoutMs: 2_000 });
  const log = logger("api");
  const ports = { ...daemonPorts(clients, { timeoutMs: 2_000, recordsTimeoutMs: 10_000, log }), validation };
  const site = apiSite(
    {
      console: clients.console,
      audience: clients.audience,
      automation: clients.automation,
      mail: clients.mail,
      webhooks: clients.webhooks,
      suppressions: clients.suppressions,
      tracking: clients.tracking,
      admission: ports.admission,
    },
    { timeoutMs: 2_000, trustProxy: opts.trustProxy ?? [], log },
  );
  const api = serveApi(
    ports,
    { trustProxy: opts.trustProxy ?? [], docsUrl: undefined, recordsTimeoutMs: 10_000, log, site },
    "127.0.0.1",
    0,
  );
  return {
    apiUrl: `http://127.0.0.1:${api.port}`,
    clients,
    records,
    async sender(slug, plan) {
      await clients.directory.createOrganization({ slug, plan });
      await clients.directory.addDomain({ slug, domain: `${slug}.example`, verified: true });
      const { token } = await clients.directory.createToken({ slug });
      return { token, id: (await clients.directory.getOrganization({ slug })).organization!.id };
    },
    async stop() {
      await api.stop(true);
      if (opts.running) await daemon.stop();
      await validation.close();
      await rpc.close();
      await records.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
