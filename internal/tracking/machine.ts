// Whether an open or a click was likely made by a machine rather than a person. The rules, first
// match wins (docs/tracking.md says what each is based on):
//
//   head-request            a HEAD request: link checkers ask for headers; a browser GETs.
//   no-user-agent           no User-Agent at all.
//   apple-privacy-proxy     an open through Apple Mail Privacy Protection, which fetches every
//                           image when the message reaches the device, read or not: its User-Agent
//                           is exactly "Mozilla/5.0", and it comes from Apple's 17.0.0.0/8.
//   scanner-user-agent      a User-Agent of a known link scanner, crawler, preview fetcher or HTTP
//                           library (a bare "Mozilla/5.0" on a click is one too: no browser sends it).
//   too-soon-after-delivery a hit less than DELIVERY_WINDOW_MS after the receiving server took the
//                           message (or before: a gateway scanning it while it is being received).
//   link-burst              a click while another link of the same message was clicked less than
//                           BURST_WINDOW_MS before or after it: a scanner following every link.
//
// Anything else is a person, image proxies that fetch on a person's behalf included: Gmail's and
// Yahoo's proxies load the pixel when the message is opened (and cache it), so their opens are
// counted as human, with the proxy named in the reason; one within the delivery window is still
// a machine's.

export interface Hit {
  kind: "open" | "click";
  /** When it came. */
  atMs: number;
  userAgent?: string;
  ip?: string;
  /** The HTTP method (GET, HEAD). */
  method?: string;
  /** Time since the receiving server accepted the message; undefined when unknown. */
  msSinceDelivery?: number;
  /** For a click: the index of the link. */
  link?: number;
  /** The other clicks of the same message near this one (before it, or after it when classified later). */
  otherClicks?: readonly { atMs: number; link: number }[];
}

export interface HitVerdict {
  machine: boolean;
  reason: string;
}

/** A hit sooner than this after delivery is a machine's. */
export const DELIVERY_WINDOW_MS = 2_000;
/** Two different links of a message clicked within this of each other: a scanner's. */
export const BURST_WINDOW_MS = 1_000;

const APPLE_PROXY_USER_AGENT = "Mozilla/5.0";

/** User-Agent words of scanners, crawlers, link previews and HTTP libraries (case-insensitive). */
const SCANNER =
  /bot(?:[/;)-]|$| \()|crawler|spider|scanner|preview|headless|phantomjs|slurp|curl\/|wget\/|python-requests|python-urllib|aiohttp|httpx|go-http-client|java\/|okhttp|apache-httpclient|libwww|axios\/|node-fetch|undici|got \(|facebookexternalhit|slackbot|twitterbot|linkedinbot|whatsapp|telegrambot|discordbot|skypeuripreview|bingpreview|googlebot|google-safety|barracuda|proofpoint|mimecast|ironport|cisco|trendmicro|fortiguard|sophos|symantec|forcepoint|zscaler|paloalto|checkpoint/i;

/** Image proxies that fetch on a person's behalf when a message is opened. */
const PERSON_PROXIES: [RegExp, string][] = [
  [/GoogleImageProxy|via ggpht\.com/i, "google"],
  [/YahooMailProxy/i, "yahoo"],
];

/** Whether ip is in Apple's 17.0.0.0/8. */
function appleNetwork(ip: string | undefined): boolean {
  const v4 = (ip ?? "").replace(/^::ffff:/i, "");
  const m = /^17\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(v4);
  return m?.slice(1).every((o) => Number(o) <= 255) === true;
}

/** Classifies one open or click (the rules at the top of this file). */
export function classifyHit(hit: Hit): HitVerdict {
  const ua = (hit.userAgent ?? "").trim();
  const machine = (reason: string): HitVerdict => ({ machine: true, reason });
  if (hit.method?.toUpperCase() === "HEAD") return machine("head-request");
  if (ua === "") return machine("no-user-agent");
  if (hit.kind === "open" && (ua === APPLE_PROXY_USER_AGENT || appleNetwork(hit.ip))) {
    return machine("apple-privacy-proxy");
  }
  if (ua === APPLE_PROXY_USER_AGENT || SCANNER.test(ua)) return machine("scanner-user-agent");
  if (hit.msSinceDelivery !== undefined && hit.msSinceDelivery < DELIVERY_WINDOW_MS) {
    return machine("too-soon-after-delivery");
  }
  if (hit.kind === "click" && hit.link !== undefined) {
    const burst = (hit.otherClicks ?? []).some(
      (c) => c.link !== hit.link && Math.abs(c.atMs - hit.atMs) < BURST_WINDOW_MS,
    );
    if (burst) return machine("link-burst");
  }
  const proxy = PERSON_PROXIES.find(([pattern]) => pattern.test(ua));
  return { machine: false, reason: proxy ? `person via ${proxy[1]} image proxy` : "person" };
}
