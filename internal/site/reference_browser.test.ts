// The API reference in a real browser: headless Chromium (playwright-core) against limiterd and
// an API process started with `bun run`. Every request the pages make is recorded: all of them
// go to the API's own origin (the renderer, its styles, fonts and images are this process's files).
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { openApiDocument } from "../api/openapi/document";
import { launchChromium, screenshot } from "../testkit/browser";
import { type Stack, startStack } from "../testkit/testkit";
import { REFERENCE_POLICY } from "./reference";

let stack: Stack;
let browser: Browser;
let base: string;

beforeAll(async () => {
  stack = await startStack();
  base = stack.apiUrls[0]!;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

const operationCount = Object.values(openApiDocument().paths as Record<string, object>).reduce(
  (n, item) => n + Object.keys(item).length,
  0,
);

/** A page that records every URL it requests and every error it logs (a refused policy is one). */
async function recordedPage(width: number): Promise<{ page: Page; requests: string[]; errors: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await context.newPage();
  const requests: string[] = [];
  const errors: string[] = [];
  page.on("request", (r) => requests.push(r.url()));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  return { page, requests, errors };
}

const origins = (urls: string[]) => [...new Set(urls.map((u) => new URL(u).origin))];

test("/docs: every operation rendered from the document, with its examples, nothing from another host", async () => {
  const { page, requests, errors } = await recordedPage(1200);
  const res = await page.goto(`${base}/docs`);
  expect(res!.headers()["content-security-policy"]).toBe(REFERENCE_POLICY);
  await page
    .locator(".opblock")
    .nth(operationCount - 1)
    .waitFor();
  expect(await page.locator(".opblock").count()).toBe(operationCount);
  expect(await page.locator(".info .title").first().innerText()).toContain("mailcore HTTP API");

  // A send, opened: its request body example and its 202 example, as the document states them.
  const send = page.locator("#operations-Emails-sendEmail");
  await send.locator(".opblock-summary").click();
  const request = send.locator(".opblock-section-request-body pre").first();
  await request.waitFor();
  expect(JSON.parse(await request.innerText())).toEqual(exampleOf("/api/v1/emails", "post", "request"));
  const accepted = send.locator('tr.response[data-code="202"] pre').first();
  expect(JSON.parse(await accepted.innerText())).toEqual(exampleOf("/api/v1/emails", "post", "202"));

  // Try it out: the health check, called from the page, under the page's policy.
  const health = page.locator("#operations-Service-health");
  await health.locator(".opblock-summary").click();
  await health.getByRole("button", { name: "Try it out" }).click();
  await health.getByRole("button", { name: "Execute" }).click();
  const status = health.locator(".live-responses-table tbody .response-col_status").first();
  await status.waitFor();
  expect(await status.innerText()).toContain("200");

  await screenshot(page, "docs-reference");
  expect(requests).toContain(`${base}/api/v1/openapi.json`);
  expect(origins(requests)).toEqual([base]);
  expect(errors).toEqual([]);
  await page.context().close();
});

test("/docs/rate-limits on a phone: the site's style, no sideways scrolling, a link back to /docs", async () => {
  const { page, requests, errors } = await recordedPage(390);
  await page.goto(`${base}/docs/rate-limits`);
  expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Rate limits");
  expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
  await screenshot(page, "docs-rate-limits-phone");
  await page.getByRole("link", { name: "← API reference" }).click();
  await page.waitForURL(`${base}/docs`);
  await page.locator(".opblock").first().waitFor();
  expect(origins(requests)).toEqual([base]);
  expect(errors).toEqual([]);
  await page.context().close();
});

/**
 * The header names of the page's parameter tables and answers' header tables, each as the lines
 * it is drawn on (a new line where a character's top moves down).
 */
const HEADER_NAME_LINES = `[...document.querySelectorAll('tr[data-param-in="header"] .parameter__name, table.headers td.header-col:first-child')].map((cell) => {
  const lines = [];
  let top;
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode())
    for (let i = 0; i < text.data.length; i++) {
      const range = document.createRange();
      range.setStart(text, i);
      range.setEnd(text, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect || !text.data[i].trim()) continue;
      if (top === undefined || rect.top > top + 4) lines.push("");
      top = rect.top;
      lines[lines.length - 1] += text.data[i];
    }
  return lines;
})`;

test.each([1280, 390])(
  "/docs at %i px: header names whole where there is room, never broken in a word",
  async (width) => {
    const { page, errors } = await recordedPage(width);
    await page.goto(`${base}/docs`);
    const upsert = page.locator("#operations-Subscribers-upsertSubscriber");
    await upsert.locator(".opblock-summary").click();
    await upsert.locator('tr[data-param-in="header"]').first().waitFor();
    await upsert.locator("table.headers").first().waitFor();
    const names = (await page.evaluate(HEADER_NAME_LINES)) as string[][];
    expect(names.map((lines) => lines.join(""))).toEqual(
      expect.arrayContaining(["Idempotency-Key", "RateLimit-Policy", "X-RateLimit-Remaining"]),
    );
    const broken = names.filter((lines) => lines.length > 1);
    // On a phone a name may break after one of its hyphens (X-RateLimit-|Remaining), never inside a word.
    if (width < 640) expect(broken.filter((lines) => lines.slice(0, -1).some((l) => !l.endsWith("-")))).toEqual([]);
    else expect(broken).toEqual([]);
    await screenshot(page, `docs-header-names-${width}`);
    expect(errors).toEqual([]);
    await page.context().close();
  },
);

type Obj = Record<string, any>;

/** The example the document gives for an operation's request body or one of its answers. */
function exampleOf(path: string, method: string, of: "request" | string): unknown {
  const op = (openApiDocument().paths as Obj)[path][method];
  const media =
    of === "request" ? op.requestBody.content["application/json"] : op.responses[of].content["application/json"];
  return media.example;
}
