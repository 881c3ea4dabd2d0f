// The console's activity pages in headless Chromium (playwright-core) against limiterd, an API
// process and a worker started with `bun run` on the embedded store, and a webhook receiver
// this file starts: the activity log's filters and pages, a message's events, the webhooks'
// health with the test and replay buttons, each attempt's answer excerpt, an endpoint's
// deliveries paged with the API's cursor, the delivery figures of the usage page, at 1280 px
// and at 390 px. Screenshots go to .test-results/screenshots/.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, phoneContext, screenshot, sidewaysScrolling } from "../testkit/browser";
import { type Receiver, startReceiver } from "../testkit/receiver";
import { runToEnd, sendEmail, type Stack, startStack, waitFor } from "../testkit/testkit";

const PASSWORD = "correct horse battery staple";
const EMAIL = "ann@acme.example";

let stack: Stack;
let browser: Browser;
let receiver: Receiver;
let base: string;
let token: string;
const sent: string[] = [];
/** Before the first message was sent. */
let sendsStartedMs = 0;
/** The endpoint whose deliveries are paged (set by the paging test, visited again at 390 px). */
let pagedId = "";
/** What /down answers: markup that must show as text, on two lines. */
const DOWN_ANSWER = '<b>down</b> for maintenance\n<script>document.title="owned"</script>';

beforeAll(async () => {
  receiver = startReceiver();
  receiver.answer("/down", () => new Response(DOWN_ANSWER, { status: 503 }));
  stack = await startStack({ workers: 1, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "1", WEBHOOK_SCHEDULE_DIVISOR: "1000" } });
  base = stack.apiUrls[0]!;
  token = await stack.org("acme", "premium");
  const r = await runToEnd("cmd/admin/index.ts", ["user", "create", "acme", EMAIL], stack.env, `${PASSWORD}\n`);
  if (r.code !== 0) throw new Error(`user create: ${r.stderr}`);
  // The endpoints first: a bounce written to the records before they exist would announce to none.
  for (const path of ["/up", "/down"]) {
    const res = await fetch(`${base}/api/v1/webhooks`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ url: `${receiver.url}${path}`, events: ["email.bounced"] }),
    });
    expect(res.status).toBe(201);
  }
  sendsStartedMs = Date.now();
  for (const [i, to] of ["delivered@fixtures.test", "bounced@fixtures.test", "Kim <kim@example.org>"].entries()) {
    for (let n = 0; n < (i === 0 ? 26 : 1); n++) {
      const res = await sendEmail(base, token, {
        from: "Acme <no-reply@acme.example>",
        to,
        subject: `Message ${i}.${n}`,
        text: "Hello",
        tags: i === 1 ? ["welcome"] : ["receipt"],
        lane: i === 1 ? "bulk" : "transactional",
      });
      expect(res.status).toBe(202);
      sent.push(res.body.id as string);
    }
  }
  await waitFor(
    "the messages to be recorded, finished",
    async () => {
      const res = await fetch(`${base}/api/v1/emails?limit=100`, { headers: { Authorization: `Bearer ${token}` } });
      const data = ((await res.json()) as { data: { status: string }[] }).data;
      return data.length === sent.length && data.every((m) => m.status === "delivered" || m.status === "bounced");
    },
    30_000,
  );
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await receiver?.stop();
});

async function signIn(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${base}/console/sign-in`);
  await page.getByLabel("Email").fill(EMAIL);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${base}/console/tokens`);
  return page;
}

describe("the console's activity pages in Chromium", () => {
  let context: BrowserContext;
  let page: Page;
  beforeAll(async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await signIn(context);
  }, 60_000);

  test("Emails: newest first, pages by cursor, filters, and a message's events", async () => {
    await page.getByRole("link", { name: "Emails", exact: true }).click();
    await page.waitForURL(`${base}/console/emails`);
    const rows = page.locator("tbody tr");
    expect(await rows.count()).toBe(25);
    expect(await rows.first().innerText()).toContain("Message 2.0");
    await screenshot(page, "activity-01-emails");
    await page.getByRole("link", { name: "Older messages" }).click();
    expect(await rows.count()).toBe(sent.length - 25);
    expect(await page.getByRole("link", { name: "Older messages" }).count()).toBe(0);

    await page.goto(`${base}/console/emails`);
    await page.getByLabel("Status").selectOption("bounced");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/status=bounced/);
    expect(await rows.count()).toBe(1);
    expect(await rows.first().innerText()).toContain("bounced@fixtures.test");
    await page.goto(`${base}/console/emails?to=${encodeURIComponent("KIM+x@example.org")}`);
    expect(await rows.count()).toBe(1);
    expect(await rows.first().innerText()).toContain("kim@example.org");
    await page.goto(`${base}/console/emails?tag=welcome&lane=bulk`);
    expect(await rows.count()).toBe(1);
    const bad = await page.goto(`${base}/console/emails?tag=${encodeURIComponent("two words")}`);
    expect(bad!.status()).toBe(422);
    expect(await page.getByRole("alert").innerText()).toContain("tag");

    // After and before: datetime inputs in UTC, passed on (and paged) in RFC 3339.
    const minute = (ms: number) => new Date(ms).toISOString().slice(0, 16);
    await page.goto(`${base}/console/emails`);
    await page.getByLabel("After").fill(minute(Date.now() + 120_000));
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/after=/);
    expect(await rows.count()).toBe(0);
    expect(await page.locator("main").innerText()).toContain("No messages match these filters.");
    const since = minute(sendsStartedMs - 60_000);
    await page.getByLabel("After").fill(since);
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(new RegExp(`after=${encodeURIComponent(since)}`));
    expect(await rows.count()).toBe(25);
    // The input shows the time as it was typed (a browser leaves out seconds that are 0).
    expect(await page.getByLabel("After").inputValue()).toBe(since);
    const older = page.getByRole("link", { name: "Older messages" });
    expect(new URL((await older.getAttribute("href"))!, base).searchParams.get("after")).toBe(`${since}:00Z`);
    await older.click();
    expect(await rows.count()).toBe(sent.length - 25);
    // An offset is read as the API reads it, and shown in UTC.
    const inAnHour = new Date(Date.now() + 3_600_000);
    const paris = `${minute(inAnHour.getTime() + 2 * 3_600_000)}:00+02:00`;
    await page.goto(`${base}/console/emails?before=${encodeURIComponent(paris)}&status=bounced`);
    expect(await rows.count()).toBe(1);
    expect(await page.getByLabel("Before").inputValue()).toBe(minute(inAnHour.getTime()));
    await page.goto(`${base}/console/emails?before=${encodeURIComponent(since)}`);
    expect(await rows.count()).toBe(0);
    // A bad time is refused in the API's words, the field named.
    for (const [query, said] of [
      ["after=yesterday", 'after: must match format "date-time".'],
      [`after=${since}&before=${minute(sendsStartedMs - 120_000)}`, "before: must be after `after`."],
    ] as const) {
      const refused = await page.goto(`${base}/console/emails?${query}`);
      expect({ query, status: refused!.status(), said: await page.getByRole("alert").innerText() }).toEqual({
        query,
        status: 422,
        said,
      });
    }
    await screenshot(page, "activity-01-emails-refused-time");
    // A cursor the list never gave is a page that says so, with the way back to the first page.
    const foreign = await page.goto(`${base}/console/emails?status=delivered&cursor=not-a-cursor`);
    expect(foreign!.status()).toBe(422);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("No such page");
    expect(await page.getByRole("alert").innerText()).toContain("cursor");
    await page.getByRole("link", { name: "First page" }).click();
    await page.waitForURL(`${base}/console/emails?status=delivered`);
    expect(await rows.count()).toBe(25);

    await page.goto(`${base}/console/emails?status=bounced`);
    await rows.first().getByRole("link").click();
    await page.waitForURL(`${base}/console/emails/${sent[26]}`);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Message 1.0");
    const events = await page.locator("tbody").innerText();
    expect(events).toContain("queued");
    expect(events).toContain("bounced");
    await screenshot(page, "activity-02-email");
    const missing = await page.goto(`${base}/console/emails/msg_000000000000000000000000`);
    expect(missing!.status()).toBe(404);
  }, 60_000);

  test("Webhooks: health, a test event, a replay; a form without the session's CSRF token changes nothing", async () => {
    await page.goto(`${base}/console/webhooks`);
    const up = page.getByRole("region", { name: `${receiver.url}/up` });
    const down = page.getByRole("region", { name: `${receiver.url}/down` });
    await waitFor(
      "the bounce's deliveries to be attempted",
      async () => receiver.at("/up").length === 1 && receiver.at("/down").length >= 2,
    );
    await page.reload();
    expect(await up.innerText()).toContain("healthy");
    await waitFor("the failing health", async () => {
      await page.reload();
      return (await down.innerText()).includes("failed in a row");
    });
    await screenshot(page, "activity-03-webhooks");

    await up.getByRole("button", { name: /Send a test event/ }).click();
    await page.waitForURL(`${base}/console/webhooks?done=tested`);
    expect(await page.getByRole("status").innerText()).toContain("webhook.test");
    await waitFor("the test event", async () => receiver.at("/up").some((r) => r.body.includes("webhook.test")));

    await page.reload();
    const replay = up.getByRole("button", { name: /Replay email.bounced/ });
    await replay.click();
    await page.waitForURL(`${base}/console/webhooks?done=replayed`);
    await waitFor(
      "the replay",
      async () => receiver.at("/up").filter((r) => r.body.includes("email.bounced")).length === 2,
    );

    const forged = await page.request.post(`${base}${await up.locator("form").first().getAttribute("action")}`, {
      form: { csrf: "not-the-token" },
    });
    expect(forged.status()).toBe(403);
    const tests = receiver.at("/up").filter((r) => r.body.includes("webhook.test")).length;
    await Bun.sleep(300);
    expect(receiver.at("/up").filter((r) => r.body.includes("webhook.test")).length).toBe(tests);
  }, 60_000);

  test("Webhooks: each attempt shows the start of the answer, as text; an endpoint's deliveries are paged with the cursor", async () => {
    await page.goto(`${base}/console/webhooks`);
    const down = page.getByRole("region", { name: `${receiver.url}/down` });
    const excerpts = down.locator("pre.excerpt");
    expect(await excerpts.count()).toBeGreaterThanOrEqual(2);
    expect(await excerpts.first().innerText()).toBe(DOWN_ANSWER);
    expect(await down.locator("pre.excerpt b, pre.excerpt script").count()).toBe(0);
    expect(await page.title()).not.toBe("owned");
    // /up answered 200 without a body: no excerpt.
    expect(
      await page
        .getByRole("region", { name: `${receiver.url}/up` })
        .locator("pre.excerpt")
        .count(),
    ).toBe(0);

    // 12 deliveries to one endpoint, each answered with its number: 10 on the first page, 2 older.
    receiver.answer("/paged", (_r, nth) => new Response(`ok ${nth}`, { status: 200 }));
    const made = await fetch(`${base}/api/v1/webhooks`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ url: `${receiver.url}/paged`, events: ["email.bounced"] }),
    });
    pagedId = ((await made.json()) as { id: string }).id;
    for (let i = 0; i < 12; i++) {
      // One at a time: the nth request answers "ok n", and the newest delivery is the 12th.
      const res = await fetch(`${base}/api/v1/webhooks/${pagedId}/test`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(202);
      await waitFor("the test event", async () => receiver.at("/paged").length === i + 1);
    }
    await waitFor("the 12 deliveries to be recorded", async () => {
      const res = await fetch(`${base}/api/v1/webhooks/${pagedId}/deliveries?limit=100`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      const data = ((await res.json()) as { data: { state: string }[] }).data;
      return data.length === 12 && data.every((d) => d.state === "delivered");
    });
    await page.reload();
    const paged = page.getByRole("region", { name: `${receiver.url}/paged` });
    const first = paged.locator("tbody tr");
    expect(await first.count()).toBe(10);
    expect(await paged.locator("pre.excerpt").allInnerTexts()).toEqual(
      Array.from({ length: 10 }, (_, i) => `ok ${12 - i}`),
    );
    await paged.getByRole("link", { name: "Older deliveries" }).click();
    await page.waitForURL(new RegExp(`/console/webhooks/${pagedId}/deliveries\\?cursor=`));
    expect(await page.locator("pre.excerpt").allInnerTexts()).toEqual(["ok 2", "ok 1"]);
    expect(await page.getByRole("link", { name: "Older deliveries" }).count()).toBe(0);
    await screenshot(page, "activity-03-webhook-deliveries");

    const first10 = await page.goto(`${base}/console/webhooks/${pagedId}/deliveries`);
    expect(first10!.status()).toBe(200);
    expect(await page.locator("tbody tr").count()).toBe(10);
    const missing = await page.goto(`${base}/console/webhooks/wh_000000000000000000000000/deliveries`);
    expect(missing!.status()).toBe(404);
    // A cursor the API did not make is refused, as every list refuses it.
    for (const path of [`/console/webhooks/${pagedId}/deliveries`, "/console/webhooks"]) {
      const foreign = await page.goto(`${base}${path}?cursor=not-a-cursor`);
      expect(foreign!.status()).toBe(422);
      expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("No such page");
      expect(await page.getByRole("link", { name: "First page" }).getAttribute("href")).toBe(path);
    }
  }, 60_000);

  test("Plan and usage: sent, delivered and bounced over 24 hours and 30 days, and this month's volume", async () => {
    await page.goto(`${base}/console/usage`);
    expect(await page.locator("#month-volume").innerText()).toBe(String(sent.length));
    expect(await page.locator("#day-delivered").innerText()).toBe(String(sent.length - 1));
    expect(await page.locator("#day-bounced").innerText()).toBe("1");
    expect(await page.getByRole("img", { name: /per hour, last 24 hours/ }).count()).toBe(1);
    expect(await page.getByRole("img", { name: /per day, last 30 days/ }).count()).toBe(1);
    await screenshot(page, "activity-04-usage");
  }, 60_000);

  test("readable on a phone: no sideways scrolling", async () => {
    const phone = await phoneContext(browser, context);
    const p = await phone.newPage();
    for (const [path, name] of [
      ["/console/emails", "activity-05-phone-emails"],
      [`/console/emails/${sent[26]}`, "activity-05-phone-email"],
      ["/console/webhooks", "activity-05-phone-webhooks"],
      [`/console/webhooks/${pagedId}/deliveries`, "activity-05-phone-webhook-deliveries"],
      ["/console/usage", "activity-05-phone-usage"],
    ] as const) {
      await p.goto(`${base}${path}`);
      expect({ path, scrolling: await sidewaysScrolling(p) }).toEqual({ path, scrolling: [] });
      await screenshot(p, name);
    }
    await phone.close();
  }, 60_000);
});
