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

/** A phone's width in CSS pixels. */
export const PHONE_WIDTH = 390;

/** A phone (390 × 844 CSS pixels, touch) signed in to the console as `signedIn` is (its session cookie). */
export async function phoneContext(browser: Browser, signedIn: BrowserContext): Promise<BrowserContext> {
  const phone = await browser.newContext({
    viewport: { width: PHONE_WIDTH, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
  });
  await phone.addCookies((await signedIn.cookies()).filter((c) => c.name === "mc_session"));
  return phone;
}

/**
 * What scrolls sideways on a page shown PHONE_WIDTH wide: the document when it is wider than
 * that (compared with the number: a mobile viewport zooms out to fit a wider page, so its
 * innerWidth grows with it), and each table wrapper whose table is wider than the wrapper (named
 * by the table's caption). Empty when the page reads on a phone without scrolling sideways.
 */
export function sidewaysScrolling(page: Page): Promise<string[]> {
  return page.evaluate(`(() => {
    const found = [];
    const width = document.documentElement.scrollWidth;
    if (width > ${PHONE_WIDTH}) found.push("the page, " + width + " px wide");
    for (const wrap of document.querySelectorAll(".table-wrap")) {
      if (wrap.scrollWidth > wrap.clientWidth)
        found.push("the table " + JSON.stringify(wrap.querySelector("caption")?.textContent ?? "") + ", " + wrap.scrollWidth + " px in " + wrap.clientWidth);
    }
    return found;
  })()`);
}
