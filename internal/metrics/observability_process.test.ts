// Metrics, logs and shutdown of the real processes (docs/operations.md, "Logs", "Metrics",
// "Shutdown"): each process serves its Prometheus registry on its own port, a request
// id follows a message from the API through limiterd to the worker, no token reaches a log,
// and SIGTERM ends every process within 10 s without losing the work under way.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Relay, startRelay } from "../testkit/relay";
import { freePort, type Proc, runBun, sendEmail, type Stack, startStack, waitFor } from "../testkit/testkit";
import { viaNodemailer } from "../testkit/smtpclients";

const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();

/** The value of one sample line ("name{labels} value"), 0 when absent. */
function sample(text: string, line: string): number {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}

/** The JSON log lines of a process. */
const lines = (p: Proc) =>
  p
    .stderr()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function stopsWithin(p: Proc, ms: number): Promise<number> {
  const started = Date.now();
  const code = await p.stop("SIGTERM");
  expect(Date.now() - started).toBeLessThan(ms);
  await p.drained; // its last lines may still be in the pipe when it exits
  return code;
}

describe("observability of the running service", () => {
  let stack: Stack;
  let relay: Relay;
  let token: string;
  let smtp: Proc;
  const ports = { limiterd: 0, api: 0, worker: 0, smtp: 0, smtpMetrics: 0 };
  beforeAll(async () => {
    for (const k of Object.keys(ports) as (keyof typeof ports)[]) ports[k] = await freePort();
    relay = await startRelay();
    stack = await startStack({
      env: {
        LIMITER_METRICS_PORT: String(ports.limiterd),
        API_METRICS_PORT: String(ports.api),
        WORKER_METRICS_PORT: String(ports.worker),
        LANE_RATE: "1000",
        RETRY_BASE_MS: "100",
      },
    });
    stack.startWorker({ SMTP_RELAY_URL: relay.url });
    token = await stack.org("acme", "premium");
    smtp = runBun("cmd/smtp/index.ts", [], {
      DATA_DIR: stack.dataDir,
      LIMITER_URL: stack.limiterUrl,
      API_URL: stack.apiUrls[0]!,
      SMTP_PORT: String(ports.smtp),
      SMTP_METRICS_PORT: String(ports.smtpMetrics),
    });
    await waitFor("smtp", async () => smtp.stderr().includes('"msg":"listening"'), 15_000);
  }, 40_000);
  afterAll(async () => {
    await smtp?.stop("SIGKILL");
    await stack?.stop();
    await relay?.stop();
  });

  test("a request id follows a message from the API through limiterd to the worker", async () => {
    const sent = await sendEmail(
      stack.apiUrls[0]!,
      token,
      { from: "no-reply@acme.example", to: "jane@dest.example", subject: "Traced", text: "x" },
      { "X-Request-Id": "trace-0001" },
    );
    expect(sent.status).toBe(202);
    expect(sent.headers.get("X-Request-Id")).toBe("trace-0001");
    await waitFor(
      "the worker's line",
      async () => lines(stack.workers[0]!).some((l) => l.requestId === "trace-0001" && l.msg === "delivered"),
      10_000,
    );
    expect(lines(stack.limiterd).find((l) => l.requestId === "trace-0001")).toMatchObject({
      level: "info",
      component: "limiterd",
      msg: "queued",
      message: sent.body.id,
    });
    // A request without one gets one made for it.
    const other = await fetch(`${stack.apiUrls[0]}/api/v1/tags`, { headers: { Authorization: `Bearer ${token}` } });
    expect(other.headers.get("X-Request-Id")).toMatch(/^req_[0-9a-f]{24}$/);
  });

  test("each process serves the metrics docs/operations.md names, and the default process metrics", async () => {
    const o = await viaNodemailer({
      port: ports.smtp,
      user: "acme",
      pass: token,
      mailFrom: "b@acme.example",
      to: ["kim@dest.example"],
      from: "no-reply@acme.example",
      subject: "Hi",
      text: "x",
    });
    expect(o.queued?.code, o.transcript).toBe(250);
    await waitFor("the delivery", async () => relay.received.some((r) => r.rcpt === "kim@dest.example"), 10_000);

    const api = await scrape(ports.api);
    expect(
      sample(api, 'mailcore_http_requests_total{route="/api/v1/emails",status="202",process="api"}'),
    ).toBeGreaterThanOrEqual(2);
    expect(
      sample(api, 'mailcore_http_request_duration_seconds_count{process="api",route="/api/v1/emails"}'),
    ).toBeGreaterThanOrEqual(2);
    const limiterd = await scrape(ports.limiterd);
    expect(sample(limiterd, 'mailcore_admissions_total{verdict="allowed",process="limiterd"}')).toBeGreaterThanOrEqual(
      3,
    );
    expect(
      sample(limiterd, 'mailcore_lane_released_total{lane="transactional",process="limiterd"}'),
    ).toBeGreaterThanOrEqual(2);
    expect(limiterd).toContain('mailcore_lane_depth{lane="bulk",process="limiterd"} 0');
    expect(limiterd).toContain('mailcore_lane_oldest_age_seconds{lane="bulk",process="limiterd"} 0');
    expect(sample(limiterd, 'mailcore_ready{process="limiterd"}')).toBe(1);
    expect(limiterd).toContain("# TYPE mailcore_records_writer_failures_total counter");
    expect(api).toContain("# TYPE mailcore_admissions_unavailable_total counter");
    const smtpText = await scrape(ports.smtpMetrics);
    expect(sample(smtpText, 'mailcore_smtp_replies_total{code="250",process="smtp"}')).toBe(1);
    expect(sample(smtpText, 'mailcore_smtp_replies_total{code="235",process="smtp"}')).toBe(1);
    const worker = await scrape(ports.worker);
    expect(sample(worker, 'mailcore_deliveries_total{outcome="delivered",process="worker"}')).toBeGreaterThanOrEqual(2);
    expect(worker).toContain("# TYPE mailcore_webhook_attempts_total counter");
    for (const text of [api, limiterd, smtpText, worker]) expect(text).toContain("process_cpu_seconds_total");
    for (const text of [limiterd, smtpText, worker]) expect(text).toContain("# TYPE mailcore_disk_full_total counter");
  });

  test("no token, password or message body in any log", async () => {
    for (const p of [stack.limiterd, ...stack.apis, ...stack.workers, smtp]) {
      expect(p.stderr()).not.toContain(token);
      expect(p.stderr()).not.toContain("mc_");
    }
  });

  test("SIGTERM: each process ends within 10 s; a delivery under way is handed back, a request under way is answered", async () => {
    // A delivery the relay holds: the worker waits for it, then cuts it off and defers it.
    const held = await sendEmail(stack.apiUrls[0]!, token, {
      from: "no-reply@acme.example",
      to: "hold@dest.example",
      subject: "Held",
      text: "x",
    });
    await waitFor("the relay to hold it", async () => relay.held() === 1, 10_000);
    expect(await stopsWithin(stack.workers[0]!, 10_000)).toBe(0);
    const view = async () =>
      (await (
        await fetch(`${stack.apiUrls[0]}/api/v1/emails/${held.body.id}`, {
          headers: { Authorization: `Bearer ${token}` },
        })
      ).json()) as { status: string; events: { status: string; detail: string }[] };
    expect((await view()).events).toContainEqual(
      expect.objectContaining({
        status: "deferred",
        detail: "the worker stopped before the delivery finished; it will be retried",
      }),
    );
    // Another worker (the file sink) delivers it: nothing was lost.
    stack.startWorker();
    await waitFor("redelivery", async () => (await view()).status === "delivered", 10_000);

    // A request under way when the API is told to stop still gets its answer.
    const slow = sendEmail(stack.apiUrls[0]!, token, {
      from: "no-reply@acme.example",
      to: "slow@dest.example",
      subject: "Slow",
      markdown: "*a".repeat(150_000),
    });
    await Bun.sleep(100);
    expect(await stopsWithin(stack.apis[0]!, 10_000)).toBe(0);
    expect([202, 422]).toContain((await slow).status);

    expect(await stopsWithin(smtp, 10_000)).toBe(0);
    for (const w of stack.workers) await stopsWithin(w, 10_000);
    expect(await stopsWithin(stack.limiterd, 10_000)).toBe(0);
    for (const p of [stack.limiterd, smtp, stack.apis[0]!]) expect(lines(p).at(-1)).toMatchObject({ msg: "stopped" });
  }, 60_000);
});
