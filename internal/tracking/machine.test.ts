import { expect, test } from "bun:test";
import { BURST_WINDOW_MS, classifyHit, DELIVERY_WINDOW_MS, type Hit } from "./machine";

const CHROME =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const IPHONE_SAFARI =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const OUTLOOK = "Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17726; Pro)";
const GMAIL_PROXY = "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)";
const LATE = 10 * 60_000;
const T = 1_750_000_000_000;

const open = (o: Partial<Hit>): Hit => ({ kind: "open", atMs: T, userAgent: CHROME, msSinceDelivery: LATE, ...o });
const click = (o: Partial<Hit>): Hit => ({
  kind: "click",
  atMs: T,
  link: 0,
  userAgent: CHROME,
  msSinceDelivery: LATE,
  ...o,
});

const CASES: [string, Hit, boolean, string][] = [
  ["a browser, minutes after delivery", click({}), false, "person"],
  ["Outlook loading images on open", open({ userAgent: OUTLOOK }), false, "person"],
  ["a phone's browser", click({ userAgent: IPHONE_SAFARI }), false, "person"],
  ["Gmail's proxy on open", open({ userAgent: GMAIL_PROXY }), false, "person via google image proxy"],
  [
    "Yahoo's proxy on open",
    open({ userAgent: "YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html" }),
    false,
    "person via yahoo image proxy",
  ],
  [
    "Gmail's proxy within the delivery window",
    open({ userAgent: GMAIL_PROXY, msSinceDelivery: 500 }),
    true,
    "too-soon-after-delivery",
  ],
  ["Apple Mail Privacy Protection", open({ userAgent: "Mozilla/5.0" }), true, "apple-privacy-proxy"],
  ["an open from Apple's network", open({ userAgent: IPHONE_SAFARI, ip: "17.58.101.2" }), true, "apple-privacy-proxy"],
  ["the same, as an IPv4-mapped address", open({ ip: "::ffff:17.1.2.3" }), true, "apple-privacy-proxy"],
  ["not Apple's: 170.17.0.1", open({ ip: "170.17.0.1" }), false, "person"],
  ["a click with the bare user agent", click({ userAgent: "Mozilla/5.0" }), true, "scanner-user-agent"],
  ["a click from Apple's network is a person's browser", click({ ip: "17.0.0.9" }), false, "person"],
  ["a HEAD request", click({ method: "HEAD" }), true, "head-request"],
  ["no user agent", open({ userAgent: undefined }), true, "no-user-agent"],
  ["a blank user agent", click({ userAgent: "  " }), true, "no-user-agent"],
  ["curl", click({ userAgent: "curl/8.5.0" }), true, "scanner-user-agent"],
  ["python-requests", click({ userAgent: "python-requests/2.32.3" }), true, "scanner-user-agent"],
  [
    "a crawler",
    click({ userAgent: "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)" }),
    true,
    "scanner-user-agent",
  ],
  [
    "a link preview",
    click({ userAgent: "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)" }),
    true,
    "scanner-user-agent",
  ],
  ["a gateway", click({ userAgent: "Mozilla/5.0 Barracuda Link Protection" }), true, "scanner-user-agent"],
  [
    "a headless browser",
    click({ userAgent: CHROME.replace("Chrome/", "HeadlessChrome/") }),
    true,
    "scanner-user-agent",
  ],
  [
    "a phone whose model ends in bot",
    click({ userAgent: "Mozilla/5.0 (Linux; Android 10; CUBOT X30) Chrome/126.0 Mobile" }),
    false,
    "person",
  ],
  ["a click one second after delivery", click({ msSinceDelivery: 1_000 }), true, "too-soon-after-delivery"],
  ["a click before delivery was recorded", click({ msSinceDelivery: -300 }), true, "too-soon-after-delivery"],
  ["a click at the window's end", click({ msSinceDelivery: DELIVERY_WINDOW_MS }), false, "person"],
  ["delivery time unknown", click({ msSinceDelivery: undefined }), false, "person"],
  [
    "another link of the message clicked 200 ms before",
    click({ link: 1, otherClicks: [{ atMs: T - 200, link: 0 }] }),
    true,
    "link-burst",
  ],
  [
    "another link clicked 300 ms after (classified later)",
    click({ link: 0, otherClicks: [{ atMs: T + 300, link: 2 }] }),
    true,
    "link-burst",
  ],
  [
    "the same link twice within a second (a double click)",
    click({ link: 1, otherClicks: [{ atMs: T - 100, link: 1 }] }),
    false,
    "person",
  ],
  [
    "another link a burst window earlier",
    click({ link: 1, otherClicks: [{ atMs: T - BURST_WINDOW_MS, link: 0 }] }),
    false,
    "person",
  ],
];

for (const [name, hit, machine, reason] of CASES) {
  test(name, () => expect(classifyHit(hit)).toEqual({ machine, reason }));
}
