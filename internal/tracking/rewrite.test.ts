import { describe, expect, test } from "bun:test";
import { DomUtils, parseDocument } from "htmlparser2";
import { applyTracking, type TrackingOptions } from "./rewrite";
import { readToken } from "./token";

const KEY = "tracking-key-for-tests-0123456789";
const PUBLIC = "https://mail.example";
const UNSUBSCRIBE = `${PUBLIC}/u/tok123`;
const OPTIONS: TrackingOptions = {
  publicUrl: PUBLIC,
  messageId: "msg_01H",
  key: KEY,
  opens: true,
  clicks: true,
  unsubscribeUrls: [UNSUBSCRIBE],
};

const REDIRECT = /https:\/\/mail\.example\/t\/c\/([\w-]+\.[\w-]+)/g;

/** Where each redirect in html sends a browser, by reading its token. */
function targets(html: string): (string | undefined)[] {
  return [...html.matchAll(REDIRECT)].map((m) => {
    const t = readToken(m[1]!, [KEY]);
    return t?.kind === "click" ? t.url : undefined;
  });
}

/** html with every redirect put back to the link it names: what the input was, if nothing else changed. */
function undo(html: string, raw: string[]): string {
  let i = 0;
  return html.replace(REDIRECT, () => raw[i++]!);
}

describe("click tracking", () => {
  test("every http(s) link of <a> and <area> is rewritten; every other byte stays", () => {
    const html = [
      "<html><body>",
      '<p>Hi <a href="https://shop.example/a?x=1&amp;y=2" class="btn">Shop</a>',
      "<A HREF='http://old.example/B'>upper</A>",
      "<a href = https://unquoted.example/c>spaces around =</a>",
      '<a\n  title="t"\n  href="  https://spaced.example/d  ">newlines and blanks</a>',
      '<map><area shape="rect" href="https://map.example/e"></map>',
      '<a href="https://dup.example/f" href="https://second.example/">two hrefs</a>',
      "</body></html>",
    ].join("\n");
    const out = applyTracking(html, { ...OPTIONS, opens: false });
    // The token holds the link as a browser reads it: entities decoded, blanks trimmed, normalized.
    const urls = [
      "https://shop.example/a?x=1&y=2",
      "http://old.example/B",
      "https://unquoted.example/c",
      "https://spaced.example/d",
      "https://map.example/e",
      "https://dup.example/f",
    ];
    expect(out.links).toEqual(urls);
    expect(targets(out.html)).toEqual(urls);
    expect(out.pixel).toBe(false);
    expect(out.html).toContain('href="https://second.example/"'); // a browser ignores a second href
    const raw = [
      "https://shop.example/a?x=1&amp;y=2",
      "http://old.example/B",
      "https://unquoted.example/c",
      "  https://spaced.example/d  ",
      "https://map.example/e",
      "https://dup.example/f",
    ];
    expect(undo(out.html, raw)).toBe(html);
  });

  test("tokens carry the link's index and the message's number of links", () => {
    const out = applyTracking('<a href="https://a.example/">a</a><a href="https://b.example/">b</a>', OPTIONS);
    const tokens = [...out.html.matchAll(REDIRECT)].map((m) => readToken(m[1]!, [KEY]));
    expect(tokens).toEqual([
      { kind: "click", messageId: "msg_01H", link: 0, links: 2, url: "https://a.example/" },
      { kind: "click", messageId: "msg_01H", link: 1, links: 2, url: "https://b.example/" },
    ]);
  });

  test("links in comments, <style>, <script>, <title> and <textarea> are not links", () => {
    const html = [
      "<html><head><title><a href='https://title.example/'></title>",
      '<style>a[href="https://style.example/"] { color: red }</style>',
      "<script>document.write('<a href=\"https://script.example/\">')</script></head><body>",
      '<!-- <a href="https://comment.example/">old</a> -->',
      '<!--[if mso]><v:roundrect href="https://vml.example/"></v:roundrect><![endif]-->',
      "<textarea><a href='https://textarea.example/'></textarea>",
      '<a href="https://real.example/">real</a>',
      "</body></html>",
    ].join("\n");
    const out = applyTracking(html, { ...OPTIONS, opens: false });
    expect(out.links).toEqual(["https://real.example/"]);
    expect(undo(out.html, ["https://real.example/"])).toBe(html);
  });

  test("the unsubscribe link, our own links, and links that are not http(s) stay as written", () => {
    const html = [
      `<a href="${UNSUBSCRIBE}">List-Unsubscribe target</a>`,
      `<a href="${PUBLIC}/u/other-token">made by {{unsubscribeUrl}}</a>`,
      `<a href="${PUBLIC}/t/c/abc.def">already tracked</a>`,
      '<a href="mailto:help@sender.example">mail</a>',
      '<a href="tel:+15550100">call</a>',
      '<a href="#top">top</a>',
      '<a href="/relative">relative</a>',
      '<a href="javascript:alert(1)">js</a>',
      "<a href>no value</a>",
      '<a name="x">no href</a>',
      '<link href="https://cdn.example/s.css" rel="stylesheet"><img src="https://cdn.example/i.png">',
      `<a href="https://long.example/${"x".repeat(3_000)}">too long to carry</a>`,
    ].join("\n");
    expect(applyTracking(html, { ...OPTIONS, opens: false })).toEqual({ html, links: [], pixel: false });
  });

  test("the unsubscribe URL is matched as a browser reads it (entities, case of the host)", () => {
    const html = '<a href="https://MAIL.example/x?a=1&amp;b=2">out</a>';
    const out = applyTracking(html, { ...OPTIONS, unsubscribeUrls: ["https://mail.example/x?a=1&b=2"] });
    expect(out.links).toEqual([]);
    // So is PUBLIC_URL: its /u/ links stay, however either is written.
    const own = applyTracking('<a href="https://MAIL.EXAMPLE/u/t">out</a>', {
      ...OPTIONS,
      publicUrl: "https://Mail.Example/",
    });
    expect(own.links).toEqual([]);
  });

  test("the rewritten HTML parses to the same elements and text", () => {
    const html =
      '<html><body><table><tr><td><a href="https://a.example/?q=&quot;x&quot;" style="color:#f00">A &amp; B</a></td></tr></table><p>After<br>text</p></body></html>';
    const out = applyTracking(html, OPTIONS);
    const before = parseDocument(html);
    const after = parseDocument(out.html);
    expect(DomUtils.textContent(after)).toBe(DomUtils.textContent(before));
    const names = (d: typeof before) => DomUtils.findAll(() => true, d.children).map((e) => e.name);
    // Depth first: the pixel, the body's last child, comes last.
    expect(names(after)).toEqual([...names(before), "img"]);
    expect(targets(out.html)).toEqual(["https://a.example/?q=%22x%22"]);
  });
});

describe("open tracking", () => {
  test("a 1x1 image whose URL names the message, before the last </body>", () => {
    const html = "<html><body><p>Hi</p></BODY></html>";
    const out = applyTracking(html, { ...OPTIONS, clicks: false });
    expect(out.pixel).toBe(true);
    const m = /<img src="https:\/\/mail\.example\/t\/o\/([\w.-]+)" width="1" height="1" alt=""[^>]*\/><\/BODY>/.exec(
      out.html,
    );
    expect(m).not.toBeNull();
    expect(readToken(m![1]!, [KEY])).toEqual({ kind: "open", messageId: "msg_01H" });
    expect(out.html.replace(/<img[^>]*\/>/, "")).toBe(html);
  });

  test("without </body> it goes before </html>, without either at the end", () => {
    expect(applyTracking("<html><p>x</p></html>", OPTIONS).html).toMatch(/<p>x<\/p><img [^>]+\/><\/html>$/);
    expect(applyTracking("<p>x</p>", OPTIONS).html).toMatch(/^<p>x<\/p><img [^>]+\/>$/);
  });

  test("neither asked: the HTML is returned as it is", () => {
    const html = '<a href="https://a.example/">a</a>';
    expect(applyTracking(html, { ...OPTIONS, opens: false, clicks: false })).toEqual({ html, links: [], pixel: false });
  });
});

test("a large message is rewritten in one pass", () => {
  const html = `<html><body>${'<p><a href="https://a.example/x">link</a> text &amp; more</p>'.repeat(20_000)}</body></html>`;
  const t0 = performance.now();
  const out = applyTracking(html, OPTIONS);
  expect(out.links).toHaveLength(20_000);
  // Not a timing assertion of the machine's speed: a quadratic rewrite would take minutes here.
  expect(performance.now() - t0).toBeLessThan(20_000);
});
