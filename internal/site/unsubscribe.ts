import { type Client, Code, ConnectError } from "@connectrpc/connect";
import type { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import type { IpGate } from "../api/server";
import type { Logger } from "../log/log";
import { type Html, html } from "../web/html";
import { pageHeaders } from "../web/headers";

// The one-click unsubscribe of campaign messages (RFC 8058), at PUBLIC_URL/u/{token}: a POST
// (the mail client's one click, or the confirm page's button) unsubscribes and is idempotent;
// a GET only shows the confirm page, since link scanners follow GETs. No API token: the token
// of the link is the credential. Every request first counts against its client IP's limit
// (the API's 500 per second), so a flood of POSTs cannot reach the records.

const PATH = /^\/u\/([A-Za-z0-9_-]{22})$/;

function page(status: number, title: string, body: Html): Response {
  const doc = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title><link rel="stylesheet" href="/assets/site.css"></head>
<body><main><h1>${title}</h1>${body}</main></body></html>`;
  // The token is in the URL: no Referer carries it elsewhere, no cache keeps the page.
  return new Response(doc.value, {
    status,
    headers: pageHeaders({ "Referrer-Policy": "no-referrer", "Cache-Control": "no-store" }),
  });
}

/** The daemon's one call these pages make. */
export type UnsubscribeCalls = Pick<Client<typeof AutomationService>, "unsubscribe">;

const unknownLink = () => page(404, "Link not found", html`<p>This unsubscribe link is not valid (any more).</p>`);

/** The /u/{token} pages; undefined for every other path. */
export function unsubscribePages(automation: UnsubscribeCalls, gate: IpGate, timeoutMs: number, log: Logger) {
  const tryAgain = () =>
    page(503, "Try again", html`<p>We could not unsubscribe you just now. Please try again in a moment.</p>`);
  return (req: Request, url: URL, peerIp: string): Promise<Response> | undefined => {
    if (!url.pathname.startsWith("/u/")) return undefined;
    return (async () => {
      let wait: number | undefined;
      try {
        wait = await gate(req, peerIp);
      } catch (err) {
        log.warn("unsubscribe: the limiter cannot be asked", { error: (err as Error).message });
        return tryAgain();
      }
      if (wait !== undefined) {
        const limited = page(
          429,
          "Too many requests",
          html`<p>Too many requests from your address. Please try again in a moment.</p>`,
        );
        limited.headers.set("Retry-After", String(wait));
        return limited;
      }
      const token = PATH.exec(url.pathname)?.[1];
      if (token === undefined) return unknownLink();
      if (req.method === "GET" || req.method === "HEAD") {
        return page(
          200,
          "Unsubscribe",
          html`<p>Stop receiving these emails?</p><form method="post"><button type="submit">Unsubscribe</button></form>`,
        );
      }
      if (req.method !== "POST") return new Response(null, { status: 405, headers: { Allow: "GET, HEAD, POST" } });
      try {
        const { email } = await automation.unsubscribe({ token }, { timeoutMs });
        return page(200, "Unsubscribed", html`<p>${email} will receive no more of these emails.</p>`);
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.NotFound) return unknownLink();
        log.warn("unsubscribe failed", { error: (err as Error).message });
        return tryAgain();
      }
    })();
  };
}
