// A headless Chromium for end-to-end tests: Debian's /usr/bin/chromium driven by playwright-core.
// Playwright gives every launch a fresh profile directory. The background-networking flags
// matter here: without them Chromium dials out at start, which this machine's closed network
// refuses.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { REPO_ROOT } from "./testkit";

export const CHROMIUM = "/usr/bin/chromium";
/** Where screenshots go: a test artifact, ignored by git. */
export const SCREENSHOTS = join(REPO_ROOT, ".test-results", "screenshots");

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Saves a full-page screenshot as .test-results/screenshots/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** A phone (390 × 844 CSS pixels, touch) signed in to the console as `signedIn` is (its session cookie). */
export async function phoneContext(browser: Browser, signedIn: BrowserContext): Promise<BrowserContext> {
  const phone = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
  });
  await phone.addCookies((await signedIn.cookies()).filter((c) => c.name === "mc_session"));
  return phone;
}
