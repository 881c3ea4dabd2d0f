// Every line every process writes is a JSON log line: limiterd, an API, a worker and an SMTP front
// as separate processes, through a send by HTTP and one by SMTP, a campaign and a webhook, then
// stopped by SIGTERM. A line of anything else (a runtime warning such as a timer's
// TimeoutNegativeWarning, a stray console.log, a stack trace) is one no log collector parses.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Receiver, startReceiver } from "../testkit/receiver";
import { viaNodemailer } from "../testkit/smtpclients";
import { type SmtpProc, sendEmail, type Stack, startSmtp, startStack, waitFor } from "../testkit/testkit";

type Json = Record<string, any>;

let stack: Stack;
let smtp: SmtpProc;
let receiver: Receiver;
let token: string;

beforeAll(async () => {
  receiver = startReceiver();
  // The receiver is on loopback, which a worker refuses by default.
  stack = await startStack({ workers: 1, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "1" } });
  smtp = await startSmtp(stack);
  token = await stack.org("logs", "enterprise");
});

afterAll(async () => {
  await smtp?.proc.stop("SIGKILL");
  await stack?.stop();
  await receiver?.stop();
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** The lines of a process's output that are not a JSON object, with where they came from. */
function notJson(name: string, stream: "stdout" | "stderr", text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line !== "")
    .filter((line) => {
      try {
        const v = JSON.parse(line);
        return v === null || typeof v !== "object" || Array.isArray(v);
      } catch {
        return true;
      }
    })
    .map((line) => `${name} ${stream}: ${line}`);
}

test("a send, a campaign and a webhook through every process: each writes JSON lines and nothing else", async () => {
  const hook = await api("POST", "/api/v1/webhooks", {
    url: `${receiver.url}/hook`,
    events: ["email.delivered"],
  });
  expect(hook.status).toBe(201);

  const sent = await sendEmail(stack.apiUrls[0]!, token, {
    from: "Logs <no-reply@logs.example>",
    to: "ann@dest.example",
    subject: "By HTTP",
    text: "x",
  });
  expect(sent.status).toBe(202);
  const bySmtp = await viaNodemailer({
    port: smtp.port,
    user: "logs",
    pass: token,
    mailFrom: "no-reply@logs.example",
    to: ["bob@dest.example"],
    from: "no-reply@logs.example",
    subject: "By SMTP",
    text: "x",
  });
  expect(bySmtp.queued?.code, bySmtp.transcript).toBe(250);

  for (const email of ["kim@dest.example", "lee@dest.example"])
    expect((await api("POST", "/api/v1/subscribers", { email, tags: ["news"] })).status).toBe(201);
  const campaign = await api("POST", "/api/v1/campaigns", {
    name: "News",
    from: "News <news@logs.example>",
    subject: "Hello",
    markdown: "Hi. [Unsubscribe]({{unsubscribeUrl}})",
    audience: { tags: ["news"] },
  });
  expect(campaign.status).toBe(201);
  expect((await api("POST", `/api/v1/campaigns/${campaign.body.id}/send`, {})).status).toBe(202);

  // Four messages delivered, each told to the webhook.
  await waitFor("four email.delivered webhooks", async () => receiver.at("/hook").length >= 4, 30_000);
  const types = receiver.at("/hook").map((r) => (JSON.parse(r.body) as Json).type);
  expect(new Set(types)).toEqual(new Set(["email.delivered"]));

  const procs = [
    ["limiterd", stack.limiterd],
    ["api", stack.apis[0]!],
    ["worker", stack.workers[0]!],
    ["smtp", smtp.proc],
  ] as const;
  // Their shutdown's lines too.
  for (const [, p] of procs) await p.stop("SIGTERM");
  for (const [, p] of procs) await p.drained;
  for (const [name, p] of procs) expect(p.stderr().length + p.stdout().length, name).toBeGreaterThan(0);
  expect(
    procs.flatMap(([name, p]) => [...notJson(name, "stdout", p.stdout()), ...notJson(name, "stderr", p.stderr())]),
  ).toEqual([]);
}, 90_000);

test("a line that is not JSON is found", () => {
  expect(
    notJson(
      "limiterd",
      "stderr",
      '{"msg":"ok"}\n(node:1) TimeoutNegativeWarning: -0.0013 is a negative number.\n"x"\n',
    ),
  ).toEqual([
    "limiterd stderr: (node:1) TimeoutNegativeWarning: -0.0013 is a negative number.",
    'limiterd stderr: "x"',
  ]);
});
