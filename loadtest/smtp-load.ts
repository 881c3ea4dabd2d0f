// The SMTP part of the load suite (k6 cannot speak SMTP without a custom build): a clean
// service on Redis (limiterd, api, worker, smtp as separate processes), MESSAGES messages
// over CLIENTS concurrent pooled SMTP sessions, each to a mailbox of its own, then checked
// like k6 thresholds: every message accepted with 250, every accepted message delivered to
// the sink exactly once (none lost, none duplicated), and a throughput figure.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, runBun, startRedis, startStack, waitFor } from "../internal/testkit/testkit";
import { type Org, smtpTransport } from "./smtpclient";
import { percentile } from "./report";

const MESSAGES = 600;
const CLIENTS = 24;
const ORGS = 6;

export interface SmtpLoadResult {
  passed: boolean;
  thresholds: Record<string, boolean>;
  messages: number;
  accepted: number;
  refused: Record<string, number>;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  delivered: number;
  duplicated: number;
}

export async function smtpLoad(log: (line: string) => void): Promise<SmtpLoadResult> {
  const redis = await startRedis();
  const stack = await startStack({ redisUrl: redis.url, workers: 1, env: { TRUST_PROXY: "127.0.0.1" } });
  const port = await freePort();
  const smtp = runBun("cmd/smtp/index.ts", [], {
    ...stack.env,
    API_URL: stack.apiUrls[0]!,
    SMTP_PORT: String(port),
    SMTP_MAX_CLIENTS: String(CLIENTS * 2),
    SMTP_MAX_CLIENTS_PER_IP: String(CLIENTS * 2),
  });
  try {
    await waitFor("the smtp front", async () => smtp.stderr().includes('"msg":"listening"'), 15_000);
    const orgs: Org[] = [];
    for (let i = 0; i < ORGS; i++)
      orgs.push({ slug: `smtp-load-${i}`, token: await stack.org(`smtp-load-${i}`, "enterprise") });
    log(`smtp: ${MESSAGES} messages over ${CLIENTS} pooled sessions`);

    const ids: string[] = [];
    const refused: Record<string, number> = {};
    const latencies: number[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, loop) => {
        const org = orgs[loop % ORGS]!;
        const tr = smtpTransport(port, org, true, loop);
        try {
          while (next < MESSAGES) {
            const n = next++;
            const t0 = performance.now();
            try {
              const info = await tr.sendMail({
                from: `Load <no-reply@${org.slug}.example>`,
                to: `user${n}@dest.example`,
                subject: `Load ${n}`,
                html: `<p>message ${n}</p>`,
              });
              latencies.push(performance.now() - t0);
              const id = /msg_[0-9a-f]{24}/.exec(info.response)?.[0];
              if (id) ids.push(id);
              else refused[info.response.slice(0, 40)] = (refused[info.response.slice(0, 40)] ?? 0) + 1;
            } catch (err) {
              const why = ((err as { response?: string }).response ?? (err as Error).message).slice(0, 40);
              refused[why] = (refused[why] ?? 0) + 1;
            }
          }
        } finally {
          tr.close();
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;

    // Delivery goes through the transactional lane at 40 per second.
    const sink = join(stack.dataDir, "sink");
    const files = () => readdirSync(sink).filter((f) => f.endsWith(".eml"));
    await waitFor(
      "delivery of every accepted message",
      async () => files().length >= ids.length,
      (ids.length / 40) * 1_000 + 20_000,
    ).catch(() => {});
    const delivered = files();
    const messageIds = delivered.map(
      (f) => /^Message-ID: <(msg_[0-9a-f]{24})@/m.exec(readFileSync(join(sink, f), "utf8"))?.[1],
    );
    const duplicated = messageIds.length - new Set(messageIds).size;
    const missing = ids.filter((id) => !messageIds.includes(id)).length;

    latencies.sort((a, b) => a - b);
    const thresholds = {
      "every message accepted (250)": ids.length === MESSAGES,
      "every accepted message delivered": missing === 0,
      "no message delivered twice": duplicated === 0,
      "no accepted id given twice": new Set(ids).size === ids.length,
    };
    return {
      passed: Object.values(thresholds).every(Boolean),
      thresholds,
      messages: MESSAGES,
      accepted: ids.length,
      refused,
      perSecond: Math.round((ids.length / seconds) * 10) / 10,
      p50Ms: Math.round(percentile(latencies, 50) ?? Number.NaN),
      p99Ms: Math.round(percentile(latencies, 99) ?? Number.NaN),
      delivered: delivered.length,
      duplicated,
    };
  } finally {
    await smtp.stop("SIGKILL");
    await stack.stop();
    await redis.stop();
  }
}
