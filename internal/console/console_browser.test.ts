// The console end to end in a real browser: headless Chromium (playwright-core) against limiterd
// and an API process started with `bun run`, on a redis-server and a DNS server this file
// starts. Screenshots of every page go to .test-results/screenshots/.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { CONTENT_SECURITY_POLICY } from "../web/headers";
import { launchChromium, phoneContext, screenshot, sidewaysScrolling } from "../testkit/browser";
import { type DnsServer, startDnsServer } from "../testkit/dns";
import {
  getJson,
  pool,
  type RedisServer,
  runToEnd,
  sendEmail,
  type Stack,
  startRedis,
  startStack,
  waitFor,
} from "../testkit/testkit";

const PASSWORD = "correct horse battery staple";
const ACME = { slug: "acme", email: "ann@acme.example" };
const RIVAL = { slug: "rival", email: "rob@rival.example" };

let redis: RedisServer;
let dns: DnsServer;
let stack: Stack;
let browser: Browser;
let base: string;

async function createUser(slug: string, email: string) {
  const r = await runToEnd(
    "cmd/admin/index.ts",
    ["user", "create", slug, email],
    { LIMITER_URL: stack.limiterUrl, DATA_DIR: stack.dataDir },
    `${PASSWORD}\n`,
  );
  if (r.code !== 0) throw new Error(`user create: ${r.stderr}`);
}

beforeAll(async () => {
  [redis, dns] = await Promise.all([startRedis(), startDnsServer()]);
  stack = await startStack({ redisUrl: redis.url, env: { DNS_SERVER: dns.address, TRUST_PROXY: "127.0.0.1" } });
  base = stack.apiUrls[0]!;
  for (const o of [ACME, RIVAL]) {
    expect((await stack.admin("org", "create", o.slug, "--plan", "free")).code).toBe(0);
    await createUser(o.slug, o.email);
  }
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await Promise.all([redis?.stop(), dns?.stop()]);
});

/** Signs in through the form, with the keyboard only; returns the page, on API Tokens. */
async function signIn(context: BrowserContext, email: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${base}/console`);
  await page.waitForURL(`${base}/console/sign-in`);
  // The email field has the focus (autofocus: waited for, since a loaded machine applies it
  // after the load event); Tab to the password; Enter submits.
  await page.waitForFunction("document.activeElement !== null && document.activeElement.id === 'email'");
  await page.keyboard.type(email);
  await page.keyboard.press("Tab");
  await page.keyboard.type(PASSWORD);
  await page.keyboard.press("Enter");
  await page.waitForURL(`${base}/console/tokens`);
  return page;
}

/** The token an API call carries, and its answer. */
const tags = (token: string) => getJson(`${base}/api/v1/tags`, token, true);

describe("the console in Chromium", () => {
  let acme: BrowserContext;
  let page: Page;
  /** A token of acme's that stays active, made through the console. */
  let kept: { id: string; token: string };

  beforeAll(async () => {
    acme = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    await acme.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
  });

  test("sign in: a wrong password is refused; the right one opens API Tokens with a strict, HttpOnly session", async () => {
    page = await acme.newPage();
    const first = await page.goto(`${base}/console/sign-in`);
    expect(first!.status()).toBe(200);
    expect(first!.headers()["content-security-policy"]).toBe(CONTENT_SECURITY_POLICY);
    await screenshot(page, "01-sign-in");
    await page.getByLabel("Email").fill(ACME.email);
    await page.getByLabel("Password").fill("not the password at all");
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith("/console/sign-in") && r.request().method() === "POST"),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    expect(refused.status()).toBe(401);
    expect(await page.getByRole("alert").innerText()).toBe("The email or the password is wrong.");
    await screenshot(page, "01b-sign-in-refused");

    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${base}/console/tokens`);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("API Tokens");
    const session = (await acme.cookies()).find((c) => c.name === "mc_session")!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Lax", secure: false, path: "/console" });
    expect(session.value).toMatch(/^mcs_[A-Za-z0-9_-]{43}$/);
  });

  test("create a token, copy it, call the API with it; revoke it and the API refuses it", async () => {
    await page.getByLabel(/^Name/).fill("ci deploys");
    const [created] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/console/tokens` && r.request().method() === "POST"),
      page.getByRole("button", { name: "Create token" }).click(),
    ]);
    expect(created.status()).toBe(201);
    const token = await page.getByLabel("The new API token").inputValue();
    expect(token).toMatch(/^mc_[A-Za-z0-9_-]{43}$/);
    await page.getByRole("button", { name: "Copy" }).click();
    // Page code as strings: this project's TypeScript has no DOM types.
    await page.waitForFunction('document.getElementById("copy-status").textContent === "Copied to the clipboard."');
    expect(await page.evaluate("navigator.clipboard.readText()")).toBe(token);
    await screenshot(page, "02-token-created");

    const used = await tags(token);
    expect(used.status).toBe(200);
    expect(used.headers.get("RateLimit-Policy")).toBe('"free";q=100;w=60');

    // Listed (name, created, last used), and never shown again.
    await page.goto(`${base}/console/tokens`);
    const row = page.getByRole("row", { name: /ci deploys/ });
    expect(await row.innerText()).toContain("UTC");
    expect(await page.content()).not.toContain(token);
    // A second token that stays: other tests use it.
    await page.getByLabel(/^Name/).fill("kept");
    await page.getByRole("button", { name: "Create token" }).click();
    kept = { token: await page.getByLabel("The new API token").inputValue(), id: "" };
    await page.goto(`${base}/console/tokens`);
    kept.id = (await page.getByRole("row", { name: /kept/ }).locator("td.mono").textContent())!;
    expect(kept.id).toMatch(/^tok_[0-9a-f]{16}$/);

    // Revoking asks first; the notice names the token.
    await page
      .getByRole("row", { name: /ci deploys/ })
      .getByRole("link", { name: /^Revoke/ })
      .click();
    const revoked = (await page.locator("form .danger").innerText()).match(/\((tok_[0-9a-f]{16})\)$/)![1]!;
    await page.getByRole("button", { name: /^Revoke ci deploys/ }).click();
    await page.waitForURL(`${base}/console/tokens?done=revoked&token=${revoked}`);
    expect(await page.getByRole("status").first().innerText()).toContain(`The token ${revoked} was revoked`);
    expect(await page.getByRole("row", { name: /ci deploys/ }).count()).toBe(0);
    await screenshot(page, "03-token-revoked");
    const refused = await tags(token);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("INVALID_TOKEN");
    expect((await tags(kept.token)).status).toBe(200);
  });

  test("add a domain; Verify fails until its TXT record is in DNS; then sends from it are accepted", async () => {
    const domain = "mail.acme.example";
    const send = () =>
      sendEmail(
        base,
        kept.token,
        { from: `Acme <hello@${domain}>`, to: "delivered@fixtures.test", subject: "Hi", text: "Hello" },
        {},
        true,
      );
    await page.goto(`${base}/console/domains`);
    await page.getByLabel(/^Domain/).fill("Mail.Acme.Example");
    await page.getByRole("button", { name: "Add domain" }).click();
    await page.waitForURL(`${base}/console/domains?done=added`);
    const row = page.getByRole("row", { name: new RegExp(domain) });
    expect(await row.innerText()).toContain("not verified");
    expect(await row.innerText()).toContain(`_mailcore.${domain}`);
    const value = (await row.locator("code", { hasText: "mailcore-verify=" }).textContent())!;
    expect(value).toMatch(/^mailcore-verify=[0-9a-f]{32}$/);
    expect((await send()).body.code).toBe("DOMAIN_NOT_VERIFIED");

    const asked = dns.questions();
    await row.getByRole("button", { name: `Verify ${domain}` }).click();
    expect(await page.getByRole("alert").innerText()).toContain(`no TXT record at _mailcore.${domain}`);
    expect(dns.questions()).toBeGreaterThan(asked);
    await screenshot(page, "04-domain-pending");

    // Another value first: still refused, and the page says what it found.
    dns.setTxt(`_mailcore.${domain}`, ["v=spf1 -all"]);
    await page.getByRole("button", { name: `Verify ${domain}` }).click();
    expect(await page.getByRole("alert").innerText()).toContain(
      `no mailcore-verify= record among the TXT records at _mailcore.${domain}`,
    );
    dns.setTxt(`_mailcore.${domain}`, ["v=spf1 -all", value]);
    await page.getByRole("button", { name: `Verify ${domain}` }).click();
    await page.waitForURL(`${base}/console/domains?done=verified`);
    const verified = page.getByRole("row", { name: new RegExp(domain) });
    expect(await verified.innerText()).toContain("verified");
    expect(await verified.innerText()).not.toContain("not verified");
    expect(await verified.getByRole("button", { name: /^Verify/ }).count()).toBe(0);
    // Every record the API shows, each name and value with a copy button: the DKIM key's copied whole.
    const dkimValue = verified.locator("code", { hasText: "v=DKIM1; k=rsa; p=" });
    expect(await dkimValue.textContent()).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]{300,}={0,2}$/);
    await verified.getByRole("button", { name: "Copy the value of the dkim record" }).click();
    await page.waitForFunction('document.getElementById("copy-status-0").textContent !== ""');
    expect(await verified.innerText()).toContain(`bounces.${domain}`);
    await screenshot(page, "05-domain-verified");
    const accepted = await send();
    expect(accepted.status).toBe(202);
  });

  test("usage moves after a burst: the bucket empties, refusals by kind are counted, the page updates itself", async () => {
    await page.goto(`${base}/console/usage`);
    const figure = async (id: string) => Number((await page.locator(`#${id}`).textContent())!.replace(" s", ""));
    expect(await figure("refused-quota")).toBe(0);
    expect(await figure("refused-recipient")).toBe(0);
    const before = await figure("remaining");

    // Six sends to one real mailbox: the sixth meets the recipient guard.
    const sends = [];
    for (let i = 0; i < 6; i++) {
      sends.push(
        await sendEmail(
          base,
          kept.token,
          { from: "hello@mail.acme.example", to: "someone@example.org", subject: `n${i}`, text: "x" },
          {},
          true,
        ),
      );
    }
    expect(sends.map((s) => s.status)).toEqual([202, 202, 202, 202, 202, 429]);
    expect(sends[5]!.body.code).toBe("RECIPIENT_RATE_LIMITED");
    // A burst past the free plan's 100.
    const burst = await pool(140, 16, () => tags(kept.token));
    const quota429 = burst.filter((r) => r.status === 429).length;
    expect(quota429).toBeGreaterThan(0);
    expect(quota429 + burst.filter((r) => r.status === 200).length).toBe(140);

    await page.goto(`${base}/console/usage`);
    expect(await figure("refused-quota")).toBe(quota429);
    expect(await figure("refused-recipient")).toBe(1);
    expect(await figure("refused-ip")).toBe(0);
    const remaining = await figure("remaining");
    expect(remaining).toBeLessThan(before);
    expect(remaining).toBeLessThan(10);
    expect(await figure("reset")).toBeGreaterThan(50);
    // The chart's bars hold the same counts (a burst may straddle two minutes).
    // The 429 chart's bars (the page has the delivery figures' charts too).
    const bars = await page.locator('svg.chart[aria-labelledby="chart-title chart-desc"] g > title').allTextContents();
    const charted = bars.map((t) => /: (\d+) quota, (\d+) IP limit, (\d+) recipient$/.exec(t)!.slice(1).map(Number));
    expect(charted).toHaveLength(60);
    expect(charted.reduce((sum, [q]) => sum + q!, 0)).toBe(quota429);
    expect(charted.reduce((sum, [, , r]) => sum + r!, 0)).toBe(1);
    await screenshot(page, "06-usage");

    // Without a reload, the page shows the bucket refilling (one request back every 600 ms).
    await waitFor("the usage page to update itself", async () => (await figure("remaining")) > remaining, 15_000);
  });

  test("another organization's user sees none of it, and cannot change it", async () => {
    const rival = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const theirs = await signIn(rival, RIVAL.email);
    expect(await theirs.getByText("No active tokens.").isVisible()).toBe(true);
    const html = await theirs.content();
    for (const secret of ["ci deploys", kept.id, "acme"]) expect(html).not.toContain(secret);
    await screenshot(theirs, "07-rival-tokens");
    await theirs.goto(`${base}/console/domains`);
    expect(await theirs.getByText("No sending domains yet.").isVisible()).toBe(true);
    expect(await theirs.content()).not.toContain("acme.example");
    await theirs.goto(`${base}/console/usage`);
    expect(await theirs.locator("#refused-quota").textContent()).toBe("0");
    expect(await theirs.locator("#remaining").textContent()).toBe("100");

    // Forged changes of acme's things, with the rival's own valid session and CSRF token.
    await theirs.goto(`${base}/console/tokens`);
    const csrf = (await theirs.locator('input[name="csrf"]').first().inputValue())!;
    const revoke = await theirs.request.post(`${base}/console/tokens/${kept.id}/revoke`, { form: { csrf } });
    expect(revoke.status()).toBe(404);
    const verify = await theirs.request.post(`${base}/console/domains/mail.acme.example/verify`, { form: { csrf } });
    expect(verify.status()).toBe(404);
    expect((await tags(kept.token)).status).not.toBe(401);
    await rival.close();
  });

  test("a change without this session's CSRF token, or from another site, is refused", async () => {
    await page.goto(`${base}/console/tokens`);
    const count = await page.getByRole("row").count();
    const csrf = (await page.locator('input[name="csrf"]').first().inputValue())!;
    const forged: Record<string, string>[] = [{ name: "no-csrf" }, { name: "wrong-csrf", csrf: "x".repeat(43) }];
    for (const form of forged) {
      const res = await page.request.post(`${base}/console/tokens`, { form });
      expect(res.status()).toBe(403);
      expect(await res.text()).toContain("CSRF token");
    }
    const revoke = await page.request.post(`${base}/console/tokens/${kept.id}/revoke`, { form: {} });
    expect(revoke.status()).toBe(403);
    const crossSite = await page.request.post(`${base}/console/tokens`, {
      form: { name: "cross-site", csrf },
      headers: { Origin: "http://evil.example" },
    });
    expect(crossSite.status()).toBe(403);
    await page.reload();
    expect(await page.getByRole("row").count()).toBe(count);
    expect(await page.content()).not.toMatch(/no-csrf|wrong-csrf|cross-site/);
    expect((await tags(kept.token)).status).not.toBe(401);
  });

  test("readable on a phone: no sideways scrolling on any page", async () => {
    const phone = await phoneContext(browser, acme);
    const p = await phone.newPage();
    for (const [path, name] of [
      ["/console/tokens", "08-phone-tokens"],
      ["/console/domains", "08-phone-domains"],
      ["/console/usage", "08-phone-usage"],
    ] as const) {
      await p.goto(`${base}${path}`);
      expect({ path, scrolling: await sidewaysScrolling(p) }).toEqual({ path, scrolling: [] });
      await screenshot(p, name);
    }
    await phone.close();
  });

  test("sign out ends the session everywhere", async () => {
    const cookie = (await acme.cookies()).find((c) => c.name === "mc_session")!;
    await page.goto(`${base}/console/tokens`);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${base}/console/sign-in?done=signed-out`);
    expect(await page.getByRole("status").innerText()).toBe("You are signed out.");
    const stale = await fetch(`${base}/console/tokens`, {
      headers: { Cookie: `mc_session=${cookie.value}` },
      redirect: "manual",
    });
    expect(stale.status).toBe(303);
    expect(stale.headers.get("location")).toBe("/console/sign-in?done=expired");
  });
});

test("under TLS (a trusted proxy that says so) the cookies are __Host- and Secure; without, they are not", async () => {
  const form = (headers: Record<string, string>) => fetch(`${base}/console/sign-in`, { headers });
  expect((await form({ "X-Forwarded-Proto": "https" })).headers.get("set-cookie")).toMatch(
    /^__Host-mc_signin=[\w-]{43}; Path=\/; Max-Age=3600; Secure; HttpOnly; SameSite=Strict$/,
  );
  expect((await form({})).headers.get("set-cookie")).not.toContain("Secure");
  const page = await form({ "X-Forwarded-Proto": "https" });
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  const signedIn = await fetch(`${base}/console/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: {
      Cookie: page.headers.get("set-cookie")!.split(";")[0]!,
      "X-Forwarded-Proto": "https",
      Origin: base.replace("http:", "https:"),
      "Content-Type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ csrf, email: RIVAL.email, password: PASSWORD }),
  });
  expect(signedIn.status).toBe(303);
  const session = signedIn.headers.getSetCookie().find((c) => c.startsWith("__Host-mc_session="))!;
  expect(session).toMatch(/^__Host-mc_session=mcs_[\w-]{43}; Path=\/; Max-Age=43200; Secure; HttpOnly; SameSite=Lax$/);
});

test("sign-in failures are limited per address and per account from an address, even for the right password", async () => {
  const email = "tess@acme.example";
  await createUser("acme", email);
  const attempt = async (who: string, password: string, ip: string) => {
    const form = await fetch(`${base}/console/sign-in`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())![1]!;
    const signin = /mc_signin=([^;]+)/.exec(form.headers.get("set-cookie")!)![1]!;
    const res = await fetch(`${base}/console/sign-in`, {
      method: "POST",
      redirect: "manual",
      headers: {
        Cookie: `mc_signin=${signin}`,
        "X-Forwarded-For": ip,
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ csrf, email: who, password }),
    });
    return { status: res.status, retryAfter: Number(res.headers.get("retry-after")), body: await res.text() };
  };
  // Per account from one address: 10 failures, then even the right password waits there...
  for (let i = 0; i < 10; i++) expect((await attempt(email, `wrong ${i}`, "10.1.0.1")).status).toBe(401);
  const locked = await attempt(email, PASSWORD, "10.1.0.1");
  expect(locked.status).toBe(429);
  expect(locked.retryAfter).toBeGreaterThan(14 * 60);
  expect(locked.body).toContain("Too many failed sign-ins");
  // ...and only there: the account's owner elsewhere is not locked out by someone who knows the email.
  expect((await attempt(email, PASSWORD, "10.1.0.99")).status).toBe(303);
  // Per address: 20 failures on accounts that do not exist, then this address waits for any account.
  for (let i = 0; i < 20; i++) expect((await attempt(`nobody${i}@acme.example`, "wrong", "10.2.0.1")).status).toBe(401);
  expect((await attempt(RIVAL.email, PASSWORD, "10.2.0.1")).status).toBe(429);
  // Another address is not held up.
  expect((await attempt(RIVAL.email, PASSWORD, "10.2.0.2")).status).toBe(303);
});
