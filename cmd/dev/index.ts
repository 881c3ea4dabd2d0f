// dev: starts the whole service (limiterd, api, smtp, worker, inbound) as separate processes
// with prefixed logs; Ctrl-C stops them all. On the first start it creates a demo organization.
import { connect } from "node:net";
import { resolve } from "node:path";
import {
  apiConfig,
  dirVar,
  inboundConfig,
  limiterdConfig,
  limiterUrl as clientLimiterUrl,
  loadOrExit,
  smtpConfig,
} from "../../internal/config/config";
import { ownerOnlyFiles } from "../../internal/datadir/datadir";
import { bootstrapDemo, DEMO, DevStack, limiterServing, waitUntil } from "../../internal/devstack/devstack";
import { limiterClients } from "../../internal/limiterclient/client";
import { clientCredential, ensurePlaneSecret } from "../../internal/plane/secret";

const root = resolve(import.meta.dir, "../..");
const daemon = loadOrExit("dev", () => limiterdConfig(process.env));
// What dev makes under DATA_DIR (and its children after it) is the user's alone.
ownerOnlyFiles();
const api = loadOrExit("dev", () => apiConfig(process.env));
const limiterUrl = `http://${daemon.host === "0.0.0.0" ? "127.0.0.1" : daemon.host}:${daemon.port}`;
const base = `http://${api.host === "0.0.0.0" ? "127.0.0.1" : api.host}:${api.port}`;
// In development the submission port is a high one (587 needs privileges).
const smtp = loadOrExit("dev", () =>
  smtpConfig({
    ...process.env,
    SMTP_PORT: process.env.SMTP_PORT?.trim() || "2587",
    API_URL: base,
    LIMITER_URL: limiterUrl,
  }),
);
const smtpHost = smtp.host === "0.0.0.0" ? "127.0.0.1" : smtp.host;
// The inbound MX (bounces and complaints) on a high port and on loopback (25 needs privileges).
const inbound = loadOrExit("dev", () =>
  inboundConfig({
    ...process.env,
    INBOUND_PORT: process.env.INBOUND_PORT?.trim() || "2525",
    INBOUND_HOST: process.env.INBOUND_HOST?.trim() || "127.0.0.1",
    LIMITER_URL: limiterUrl,
  }),
);
const inboundHost = inbound.host === "0.0.0.0" ? "127.0.0.1" : inbound.host;
// For people: readable log lines unless LOG_FORMAT says otherwise.
// Each process serves its metrics in development unless its port is set (0: off).
const METRICS_PORTS = {
  LIMITER_METRICS_PORT: "9101",
  API_METRICS_PORT: "9102",
  SMTP_METRICS_PORT: "9103",
  WORKER_METRICS_PORT: "9104",
  INBOUND_METRICS_PORT: "9105",
};
const metricsPorts = Object.fromEntries(
  Object.entries(METRICS_PORTS).map(([name, port]) => [name, process.env[name]?.trim() || port]),
);
const env = {
  ...process.env,
  ...metricsPorts,
  DATA_DIR: daemon.dataDir,
  LIMITER_URL: limiterUrl,
  API_URL: base,
  SMTP_PORT: String(smtp.port),
  INBOUND_PORT: String(inbound.port),
  INBOUND_HOST: inbound.host,
  LOG_FORMAT: process.env.LOG_FORMAT?.trim() || "pretty",
  // On a developer's machine, webhooks to a receiver on localhost are the point.
  WEBHOOK_ALLOW_PRIVATE_URLS: process.env.WEBHOOK_ALLOW_PRIVATE_URLS?.trim() || "1",
  // Links in mail (unsubscribe) point at this API, whatever its port, unless said otherwise.
  PUBLIC_URL: process.env.PUBLIC_URL?.trim() || base,
};

/** An SMTP server (the SMTP front, the inbound MX) greets. */
const greets = (host: string, port: number) => () =>
  new Promise<boolean>((done) => {
    const socket = connect({ host, port });
    const end = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.once("data", (chunk: Buffer) => end(chunk.toString().startsWith("220")));
    socket.once("error", () => end(false));
    socket.setTimeout(1_000, () => end(false));
  });
const stack = new DevStack(root, env);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void stack.stop(0));

try {
  // The plane secret before limiterd starts, so the dev stack's own calls carry it from the first.
  ensurePlaneSecret(daemon.dataDir);
  const clients = limiterClients(limiterUrl, clientCredential(undefined, daemon.dataDir));
  stack.start({ name: "limiterd", entry: "cmd/limiterd/index.ts" });
  await waitUntil("limiterd", () => limiterServing(clients));
  stack.start({ name: "api", entry: "cmd/api/index.ts" });
  await waitUntil("api", async () => (await fetch(`${base}/healthz`)).ok);
  stack.start({ name: "smtp", entry: "cmd/smtp/index.ts" });
  await waitUntil("smtp", greets(smtpHost, smtp.port));
  stack.start({ name: "worker", entry: "cmd/worker/index.ts" });
  stack.start({ name: "inbound", entry: "cmd/inbound/index.ts" });
  await waitUntil("inbound", greets(inboundHost, inbound.port));

  const demo = await bootstrapDemo(clients);
  const lines = [
    "",
    `The service is up (store: ${daemon.redisUrl ? "redis" : `embedded, ${daemon.dataDir}`}). Ctrl-C stops it.`,
    `  API            ${base}/api/v1`,
    `  API reference  ${base}/docs (OpenAPI: ${base}/api/v1/openapi.json)`,
    `  rate limits    ${base}/docs/rate-limits`,
    `  console        ${base}/console`,
    `  SMTP           ${smtpHost}:${smtp.port} (STARTTLS, then AUTH with any username and an API token as the password)`,
    `  inbound MX     ${inboundHost}:${inbound.port} (bounces to the return paths${inbound.fblAddresses.length ? `, complaints to ${inbound.fblAddresses.join(", ")}` : "; FBL_ADDRESS for complaints"})`,
    `  limiterd       ${limiterUrl} (Connect, gRPC, gRPC-Web)`,
    `  delivered mail ${daemon.dataDir}/sink/<id>.eml (set SMTP_RELAY_URL to send through a relay); mail to @fixtures.test is simulated and written nowhere`,
    `  public URL     ${env.PUBLIC_URL} (links in mail: unsubscribe)`,
    `  metrics        ${
      Object.entries(metricsPorts)
        .filter(([, port]) => port !== "0")
        .map(([name, port]) => `${name.split("_")[0]!.toLowerCase()} http://127.0.0.1:${port}/metrics`)
        .join(", ") || "off (every *_METRICS_PORT is 0)"
    }`,
  ];
  if (demo) {
    const { token } = demo;
    lines.push(
      `Created organization "${DEMO.slug}" (free plan) with the verified domain ${DEMO.domain},`,
      `a console user (sign in at ${base}/console as ${DEMO.email} with the password ${demo.password}, shown once)`,
      `and this API token (shown once):`,
      `  ${token}`,
      `Try it:`,
      `  curl -i ${base}/api/v1/tags -H "Authorization: Bearer ${token}"`,
      `  curl -i ${base}/api/v1/emails -H "Authorization: Bearer ${token}" -H "Content-Type: application/json" \\`,
      `    -d '{"from":"Demo <hello@${DEMO.domain}>","to":"delivered@fixtures.test","subject":"Hi","markdown":"**It works.**"}'`,
      `  curl -i ${base}/api/v1/emails -H "Authorization: Bearer ${token}" -H "Content-Type: application/json" \\`,
      `    -d '{"from":"Demo <hello@${DEMO.domain}>","to":"you@example.com","subject":"Hi","text":"Look in ${daemon.dataDir}/sink/."}'`,
      `  swaks --server ${smtpHost}:${smtp.port} --tls --auth-user ${DEMO.slug} --auth-password ${token} --from hello@${DEMO.domain} --to delivered@fixtures.test`,
    );
  } else {
    // The admin CLI finds the daemon at its default address, and the plane secret in the default
    // DATA_DIR; anything else the line says.
    const at = [
      ...(limiterUrl === clientLimiterUrl({}) ? [] : [`LIMITER_URL=${limiterUrl}`]),
      ...(daemon.dataDir === dirVar({}, "DATA_DIR", "data") ? [] : [`DATA_DIR=${daemon.dataDir}`]),
    ]
      .map((v) => `${v} `)
      .join("");
    lines.push(
      `Organization "${DEMO.slug}" exists. A new token: ${at}npx bun run cmd/admin/index.ts token create ${DEMO.slug}`,
    );
  }
  console.log(`${lines.join("\n")}\n`);
} catch (err) {
  console.error(`dev: ${(err as Error).message}`);
  await stack.stop(1);
}
