// The console's subscribers, campaigns and workflows pages, the token revocation's confirmation,
// and what a browser gets outside the console, in headless Chromium (playwright-core) against
// limiterd, an API process and a worker started with `bun run` (embedded store). The data is
// made through the HTTP API, as a user would. Screenshots go to .test-results/screenshots/.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, PHONE_WIDTH, phoneContext, screenshot, sidewaysScrolling } from "../testkit/browser";
import { getJson, runToEnd, type Stack, startStack, waitFor } from "../testkit/testkit";

const PASSWORD = "correct horse battery staple";
const ACME = { slug: "acme", email: "ann@acme.example" };
const RIVAL = { slug: "rival", email: "rob@rival.example" };
/** 25 readers, then the two fixture addresses tagged vip: 27 subscribers, two pages of 20. */
const READERS = Array.from({ length: 25 }, (_, i) => `reader${String(i).padStart(2, "0")}@people.example`);

let stack: Stack;
let browser: Browser;
let base: string;
const tokens: Record<string, string> = {};

async function api(method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function signIn(context: BrowserContext, email: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${base}/console/sign-in`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${base}/console/tokens`);
  return page;
}

/** The rows of the page's table body. */
const rows = (page: Page) => page.locator("tbody tr");

beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  base = stack.apiUrls[0]!;
  for (const o of [ACME, RIVAL]) {
    tokens[o.slug] = await stack.org(o.slug, "free");
    const r = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", o.slug, o.email],
      { LIMITER_URL: stack.limiterUrl, DATA_DIR: stack.dataDir },
      `${PASSWORD}\n`,
    );
    if (r.code !== 0) throw new Error(`user create: ${r.stderr}`);
  }
  const acme = tokens.acme!;
  // Workflows first, so that the subscribers start their runs.
  await api("POST", "/api/v1/workflows", acme, {
    name: "Welcome VIPs",
    trigger: { type: "tag.added", tag: "vip" },
    active: true,
    steps: [{ type: "add_tag", tag: "welcomed" }],
  });
  await api("POST", "/api/v1/workflows", acme, {
    name: "Slow drip",
    trigger: { type: "subscriber.created" },
    active: true,
    steps: [
      { type: "wait", seconds: 3600 },
      { type: "add_tag", tag: "dripped" },
    ],
  });
  await api("POST", "/api/v1/subscribers/batch", acme, {
    subscribers: READERS.map((email, i) => ({ email, tags: i % 2 === 0 ? ["news"] : [] })),
  });
  for (const email of ["delivered@fixtures.test", "bounced@fixtures.test"])
    await api("POST", "/api/v1/subscribers", acme, { email, name: "Dee <b>VIP</b>", tags: ["vip"] });
  const campaign = (await api("POST", "/api/v1/campaigns", acme, {
    name: "November news",
    from: "Acme <news@acme.example>",
    subject: "News for {{subscriber.name}}",
    text: "Hello",
    audience: { tags: ["vip"] },
  })) as { id: string };
  await api("POST", `/api/v1/campaigns/${campaign.id}/send`, acme, {});
  await waitFor(
    "the campaign's two messages to end",
    async () => {
      const c = (await api("GET", `/api/v1/campaigns/${campaign.id}`, acme)) as {
        stats: { delivered: number; bounced: number };
      };
      return c.stats.delivered === 1 && c.stats.bounced === 1;
    },
    60_000,
  );
  await api("POST", "/api/v1/suppressions", acme, { email: "gone@people.example", detail: "asked by phone" });
  // The rival has its own of each.
  const rival = tokens.rival!;
  await api("POST", "/api/v1/subscribers", rival, { email: "rival-secret@people.example", tags: ["rivals-only"] });
  await api("POST", "/api/v1/workflows", rival, {
    name: "Rival flow",
    trigger: { type: "subscriber.created" },
    steps: [{ type: "add_tag", tag: "x" }],
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

describe("the audience and automation pages in Chromium", () => {
  let acme: BrowserContext;
  let page: Page;
  let deeId = "";
  let dripPath = "";

  beforeAll(async () => {
    acme = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await signIn(acme, ACME.email);
  });

  test("subscribers: newest first, 20 to a page with the next one behind the cursor; search by email prefix; filter by tag", async () => {
    await page.getByRole("link", { name: "Subscribers", exact: true }).click();
    await page.waitForURL(`${base}/console/subscribers`);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Subscribers");
    expect(await rows(page).count()).toBe(20);
    // Newest first: the two VIPs were added last.
    expect(await rows(page).first().locator("th").innerText()).toBe("bounced@fixtures.test");
    await screenshot(page, "10-subscribers");
    const firstPage = await rows(page).locator("th").allInnerTexts();
    await page.getByRole("link", { name: "Next page" }).click();
    expect(page.url()).toMatch(/\/console\/subscribers\?cursor=/);
    const secondPage = await rows(page).locator("th").allInnerTexts();
    expect(secondPage).toHaveLength(7);
    expect(await page.getByText("Last page").isVisible()).toBe(true);
    expect(new Set([...firstPage, ...secondPage])).toEqual(
      new Set([...READERS, "delivered@fixtures.test", "bounced@fixtures.test"]),
    );
    await page.getByRole("link", { name: "First page" }).click();
    expect(await rows(page).locator("th").allInnerTexts()).toEqual(firstPage);

    await page.getByLabel("Email starts with").fill("Reader1");
    await page.getByRole("button", { name: "Search" }).click();
    expect(page.url()).toBe(`${base}/console/subscribers?email=Reader1&tag=`);
    expect((await rows(page).locator("th").allInnerTexts()).sort()).toEqual(READERS.slice(10, 20));
    expect(await page.getByLabel("Email starts with").inputValue()).toBe("Reader1");
    // Both filters at once: readers 10-19 with the news tag (the even ones).
    await page.getByLabel("Tag").fill("news");
    await page.getByRole("button", { name: "Search" }).click();
    expect((await rows(page).locator("th").allInnerTexts()).sort()).toEqual(
      READERS.slice(10, 20).filter((_, i) => i % 2 === 0),
    );
    await screenshot(page, "11-subscribers-search");
    await page.getByLabel("Email starts with").fill("nobody");
    await page.getByRole("button", { name: "Search" }).click();
    expect(await page.getByText("No subscriber matches.").isVisible()).toBe(true);
    await page.getByRole("link", { name: "Clear" }).click();
    expect(await rows(page).count()).toBe(20);

    // A tag is a link to its filter.
    await rows(page).filter({ hasText: "delivered@fixtures.test" }).getByRole("link", { name: "vip" }).click();
    await page.waitForURL(`${base}/console/subscribers?tag=vip`);
    expect((await rows(page).locator("th").allInnerTexts()).sort()).toEqual([
      "bounced@fixtures.test",
      "delivered@fixtures.test",
    ]);
  });

  test("a subscriber's page: its fields, tags and events, newest first", async () => {
    await page.getByRole("link", { name: "delivered@fixtures.test" }).click();
    await page.waitForURL(/\/console\/subscribers\/sub_/);
    deeId = page.url().split("/").pop()!;
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("delivered@fixtures.test");
    // Escaped, never markup.
    expect(await page.locator("dl.record").innerText()).toContain("Dee <b>VIP</b>");
    const events = await rows(page).locator("th").allInnerTexts();
    for (const type of ["subscriber.created", "tag.added", "email.queued", "email.delivered", "workflow.started"])
      expect(events).toContain(type);
    expect(events.at(-1)).toBe("subscriber.created");
    expect(await rows(page).filter({ hasText: "email.delivered" }).innerText()).toContain("News for Dee <b>VIP</b>");
    await screenshot(page, "12-subscriber");
  });

  test("campaigns: each with its stats", async () => {
    await page.getByRole("link", { name: "Campaigns", exact: true }).click();
    await page.waitForURL(`${base}/console/campaigns`);
    const row = rows(page).filter({ hasText: "November news" });
    expect(await row.locator('[data-label="Status"]').innerText()).toBe("sent");
    expect(await row.locator('[data-label="Audience"]').innerText()).toBe("vip");
    const figure = async (label: string) => Number(await row.locator(`[data-label="${label}"]`).innerText());
    expect(await figure("Recipients")).toBe(2);
    expect(await figure("Queued")).toBe(2);
    expect(await figure("Delivered")).toBe(1);
    expect(await figure("Bounced")).toBe(1);
    expect(await figure("Failed")).toBe(0);
    expect(await figure("Skipped")).toBe(0);
    await screenshot(page, "13-campaigns");
  });

  test("suppressions: the organization's list, of one reason or all", async () => {
    await page.getByRole("link", { name: "Suppressions", exact: true }).click();
    await page.waitForURL(`${base}/console/suppressions`);
    const row = rows(page).filter({ hasText: "gone@people.example" });
    expect(await row.locator('[data-label="Reason"]').innerText()).toBe("added by the organization");
    expect(await row.locator('[data-label="Detail"]').innerText()).toBe("asked by phone");
    await screenshot(page, "13b-suppressions");
    await page.getByLabel("Reason").selectOption("complaint");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(`${base}/console/suppressions?reason=complaint`);
    expect(await page.getByText("No address is listed for this reason.").isVisible()).toBe(true);
    await page.getByLabel("Reason").selectOption("manual");
    await page.getByRole("button", { name: "Show" }).click();
    expect(await rows(page).locator("th").allInnerTexts()).toEqual(["gone@people.example"]);
    const refused = await page.goto(`${base}/console/suppressions?reason=${encodeURIComponent("<i>x</i>")}`);
    expect(refused!.status()).toBe(422);
    expect(await page.getByRole("alert").innerText()).toBe("There is no reason “<i>x</i>”.");
  });

  test("workflows, and a workflow's runs paged by its cursor", async () => {
    await page.getByRole("link", { name: "Workflows", exact: true }).click();
    await page.waitForURL(`${base}/console/workflows`);
    expect(await rows(page).locator("th").allInnerTexts()).toEqual(["Slow drip", "Welcome VIPs"]);
    expect(await rows(page).first().innerText()).toContain("wait → add_tag");
    expect(await rows(page).last().innerText()).toContain("tag “vip” added");
    await screenshot(page, "14-workflows");

    await page.getByRole("link", { name: "Welcome VIPs" }).click();
    await page.waitForURL(/\/console\/workflows\/wf_/);
    await waitFor("both VIP runs to complete", async () => {
      await page.reload();
      return (await rows(page).filter({ hasText: "completed" }).count()) === 2;
    });
    await rows(page).filter({ hasText: deeId }).getByRole("link", { name: deeId }).click();
    expect(page.url()).toBe(`${base}/console/subscribers/${deeId}`);

    await page.goto(`${base}/console/workflows`);
    await page.getByRole("link", { name: "Slow drip" }).click();
    await page.waitForURL(/\/console\/workflows\/wf_/);
    dripPath = new URL(page.url()).pathname;
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Slow drip");
    expect(await rows(page).count()).toBe(20);
    expect(await rows(page).first().locator('[data-label="State"]').innerText()).toBe("active");
    expect(await rows(page).first().locator('[data-label="Step"]').innerText()).toMatch(
      /^next: (1 of 2 \(wait\)|2 of 2 \(add_tag\))$/,
    );
    await screenshot(page, "15-workflow-runs");
    const first = await rows(page).locator("th").allInnerTexts();
    await page.getByRole("link", { name: "Next page" }).click();
    const second = await rows(page).locator("th").allInnerTexts();
    expect(second).toHaveLength(7);
    expect(new Set([...first, ...second]).size).toBe(27);
  });

  test("a filter or cursor that is refused is a page that says why (422)", async () => {
    const res = await page.goto(`${base}/console/subscribers?tag=${encodeURIComponent("<b>x</b>")}&email=kim`);
    expect(res!.status()).toBe(422);
    expect(await page.getByRole("alert").innerText()).toBe(
      'tag: "<b>x</b>" is not a tag name (1 to 64 letters, digits, spaces, _ and -).',
    );
    // The form keeps what was typed, to correct it.
    expect(await page.getByLabel("Tag").inputValue()).toBe("<b>x</b>");
    expect(await page.getByLabel("Email starts with").inputValue()).toBe("kim");
    await screenshot(page, "11b-subscribers-refused-filter");
    expect((await page.goto(`${base}/console/subscribers?email=${"a".repeat(255)}`))!.status()).toBe(422);

    for (const path of [
      "/console/subscribers",
      `/console/subscribers/${deeId}`,
      "/console/campaigns",
      "/console/workflows",
      "/console/suppressions",
      dripPath,
    ]) {
      const res = await page.request.get(`${base}${path}?cursor=not-a-cursor`);
      expect(res.status()).toBe(422);
      expect(await res.text()).toContain("cursor");
    }
  });

  test("another organization sees none of it, not even by id", async () => {
    const rival = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const theirs = await signIn(rival, RIVAL.email);
    await theirs.goto(`${base}/console/subscribers`);
    expect(await rows(theirs).locator("th").allInnerTexts()).toEqual(["rival-secret@people.example"]);
    await theirs.goto(`${base}/console/campaigns`);
    expect(await theirs.getByText("No campaigns yet.").isVisible()).toBe(true);
    await theirs.goto(`${base}/console/workflows`);
    expect(await rows(theirs).locator("th").allInnerTexts()).toEqual(["Rival flow"]);
    await theirs.goto(`${base}/console/suppressions`);
    expect(await theirs.getByText("No suppressed addresses.").isVisible()).toBe(true);
    for (const path of [
      `/console/subscribers/${deeId}`,
      `/console/subscribers/delivered@fixtures.test`,
      `/console/subscribers/tag`,
      dripPath,
    ]) {
      const res = await theirs.goto(`${base}${path}`);
      expect(res!.status()).toBe(404);
      expect(await theirs.content()).not.toMatch(/Dee|bounced@|Slow drip|welcomed/);
    }
    await screenshot(theirs, "16-rival-subscriber-not-found");
    // And acme sees nothing of the rival's.
    await page.goto(`${base}/console/subscribers?email=rival`);
    expect(await page.getByText("No subscriber matches.").isVisible()).toBe(true);
    await page.goto(`${base}/console/subscribers?tag=rivals-only`);
    expect(await rows(page).count()).toBe(0);
    await rival.close();
  });

  test("readable on a phone: no sideways scrolling on any of these pages", async () => {
    const phone = await phoneContext(browser, acme);
    const p = await phone.newPage();
    for (const [path, name] of [
      ["/console/subscribers", "17-phone-subscribers"],
      [`/console/subscribers/${deeId}`, "17-phone-subscriber"],
      ["/console/campaigns", "17-phone-campaigns"],
      ["/console/workflows", "17-phone-workflows"],
      ["/console/suppressions", "17-phone-suppressions"],
      [dripPath, "17-phone-workflow-runs"],
      ["/console/tokens", "17-phone-tokens"],
    ] as const) {
      const res = await p.goto(`${base}${path}`);
      expect(res!.status()).toBe(200);
      expect({ path, scrolling: await sidewaysScrolling(p) }).toEqual({ path, scrolling: [] });
      await screenshot(p, name);
    }
    await phone.close();
  });

  test("two tokens of one name are told apart; revoking one asks first, naming it, and the notice names it", async () => {
    const made: string[] = [];
    for (let i = 0; i < 2; i++) {
      await page.goto(`${base}/console/tokens`);
      await page.getByLabel(/^Name/).fill("deploys");
      await page.getByRole("button", { name: "Create token" }).click();
      made.push(await page.getByLabel("The new API token").inputValue());
    }
    await page.goto(`${base}/console/tokens`);
    const ids = await rows(page).filter({ hasText: "deploys" }).locator('[data-label="Id"]').allInnerTexts();
    expect(ids).toHaveLength(2);
    expect(ids[0]).not.toBe(ids[1]);
    const [gone, kept] = ids as [string, string];

    await page.getByRole("link", { name: `Revoke deploys (${gone})` }).click();
    await page.waitForURL(`${base}/console/tokens/${gone}/revoke`);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Revoke a token?");
    expect(await page.getByRole("alert").innerText()).toContain(`Revoke the token “deploys” (${gone}), created`);
    await screenshot(page, "18-token-revoke-confirm");
    await page.setViewportSize({ width: PHONE_WIDTH, height: 844 });
    expect(await sidewaysScrolling(page)).toEqual([]);
    await screenshot(page, "18b-phone-token-revoke-confirm");
    await page.setViewportSize({ width: 1280, height: 800 });
    // Cancel changes nothing.
    await page.getByRole("link", { name: "Cancel, keep it" }).click();
    await page.waitForURL(`${base}/console/tokens`);
    expect(await rows(page).filter({ hasText: "deploys" }).count()).toBe(2);
    for (const t of made) expect((await getJson(`${base}/api/v1/tags`, t)).status).toBe(200);

    await page.getByRole("link", { name: `Revoke deploys (${gone})` }).click();
    await page.getByRole("button", { name: `Revoke deploys (${gone})` }).click();
    await page.waitForURL(`${base}/console/tokens?done=revoked&token=${gone}`);
    expect(await page.getByRole("status").first().innerText()).toBe(
      `The token ${gone} was revoked. The API refuses it from the next request on.`,
    );
    expect(await rows(page).filter({ hasText: "deploys" }).locator('[data-label="Id"]').allInnerTexts()).toEqual([
      kept,
    ]);
    await screenshot(page, "19-token-revoked-named");
    const answers = await Promise.all(made.map((t) => getJson(`${base}/api/v1/tags`, t)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 401]);
    // The confirmation of a token that is not active (revoked, or another organization's) is not found.
    expect((await page.goto(`${base}/console/tokens/${gone}/revoke`))!.status()).toBe(404);
  });
});

describe("what a browser gets outside the console", () => {
  test("/ is a landing page linking the console, the docs and the health checks", async () => {
    const context = await browser.newContext({ viewport: { width: PHONE_WIDTH, height: 844 } });
    const page = await context.newPage();
    const res = await page.goto(`${base}/`);
    expect(res!.status()).toBe(200);
    expect(res!.headers()["content-type"]).toBe("text/html; charset=utf-8");
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("mailcore");
    expect(await sidewaysScrolling(page)).toEqual([]);
    await screenshot(page, "20-landing");
    for (const [name, path] of [
      ["Console", "/console/sign-in"],
      ["API reference", "/docs"],
      ["rate limits", "/docs/rate-limits"],
    ]) {
      await page.goto(`${base}/`);
      await page.getByRole("link", { name, exact: true }).click();
      await page.waitForURL(`${base}${path}`);
    }
    await page.goto(`${base}/`);
    await page.getByRole("link", { name: "/healthz" }).click();
    expect(await page.locator("body").innerText()).toContain('"status":"ok"');
    await context.close();
  });

  test("an unknown path is an HTML 404 for a browser; the API and the probes keep their JSON", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const res = await page.goto(`${base}/no/such/page`);
    expect(res!.status()).toBe(404);
    expect(res!.headers()["content-type"]).toBe("text/html; charset=utf-8");
    expect(await page.getByRole("alert").innerText()).toBe("There is no page /no/such/page.");
    expect(await page.getByRole("link", { name: "Console" }).isVisible()).toBe(true);
    await screenshot(page, "21-not-found");
    // The browser's icon request is sent to the site's icon.
    const icon = await fetch(`${base}/favicon.ico`, { redirect: "manual" });
    expect([icon.status, icon.headers.get("location")]).toEqual([301, "/assets/favicon.svg"]);
    await context.close();

    const html = { Accept: "text/html,application/xhtml+xml,*/*;q=0.8" };
    // Under /api/ a browser gets the API's JSON too.
    const apiPath = await fetch(`${base}/api/v1/nothing`, { headers: html });
    expect(apiPath.status).toBe(401);
    expect(((await apiPath.json()) as { code: string }).code).toBe("MISSING_TOKEN");
    // A client that does not ask for HTML keeps the JSON answer.
    const plain = await fetch(`${base}/no/such/page`, { headers: { Accept: "application/json" } });
    expect(plain.status).toBe(401);
    expect(plain.headers.get("content-type")).toContain("application/json");
    for (const probe of ["/healthz", "/readyz"]) {
      const r = await fetch(`${base}${probe}`, { headers: html });
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toContain("application/json");
    }
  });
});
