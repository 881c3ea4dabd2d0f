import type { Client } from "@connectrpc/connect";
import type { IpGate } from "../api/server";
import { clientIp } from "../clientip/clientip";
import type { TrackingService } from "../gen/mailcore/limiter/v1/feedback_pb";
import type { Logger } from "../log/log";
import { type Html, html } from "../web/html";
import { pageHeaders } from "../web/headers";

// The tracking URLs of messages sent with tracking: PUBLIC_URL/t/o/{token}, the open pixel, and
// PUBLIC_URL/t/c/{token}, a link's redirect. The token is signed by the daemon, which checks it
// and says where a click goes: only to a link that was in a message it sent (never an open
// redirect). No API token; every request counts against its client IP's limit first.

const PATH = /^\/t\/([oc])\/([A-Za-z0-9_-]{1,3000}\.[A-Za-z0-9_-]{1,64})$/;

/** A transparent 1x1 GIF. */
const PIXEL = Buffer.from("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7", "base64");

/** The daemon's one call these URLs make. */
export type TrackingCalls = Pick<Client<typeof TrackingService>, "recordHit">;

function page(status: number, title: string, body: Html): Response {
  const doc = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title><link rel="stylesheet" href="/assets/site.css"></head>
<body><main><h1>${title}</h1>${body}</main></body></html>`;
  return new Response(doc.value, {
    status,
    headers: pageHeaders({ "Referrer-Policy": "no-referrer", "Cache-Control": "no-store" }),
  });
}

const pixel = () =>
  new Response(PIXEL, {
    headers: { "Content-Type": "image/gif", "Cache-Control": "no-store, private", "Referrer-Policy": "no-referrer" },
  });
const unknownLink = () => page(404, "Link not found", html`<p>This link is not valid.</p>`);

/** The /t/ URLs; undefined for every other path. */
export function trackingPages(
  tracking: TrackingCalls,
  gate: IpGate,
  o: { timeoutMs: number; trustProxy: readonly string[]; log: Logger },
) {
  return (req: Request, url: URL, peerIp: string): Promise<Response> | undefined => {
    if (!url.pathname.startsWith("/t/")) return undefined;
    return (async () => {
      if (req.method !== "GET" && req.method !== "HEAD")
        return new Response(null, { status: 405, headers: { Allow: "GET, HEAD" } });
      const m = PATH.exec(url.pathname);
      if (!m) return unknownLink();
      const [, kind, token] = m as unknown as [string, "o" | "c", string];
      // The pixel is served whatever happens: an image that fails shows as broken in the message.
      const fallback = () =>
        kind === "o"
          ? pixel()
          : page(503, "Try again", html`<p>This link cannot be followed just now. Please try again in a moment.</p>`);
      try {
        const wait = await gate(req, peerIp);
        if (wait !== undefined)
          return kind === "o" ? pixel() : page(429, "Too many requests", html`<p>Please try again in a moment.</p>`);
        const hit = await tracking.recordHit(
          {
            token,
            method: req.method,
            userAgent: req.headers.get("user-agent") ?? "",
            ip: clientIp(peerIp, req.headers.get("x-forwarded-for"), o.trustProxy),
          },
          { timeoutMs: o.timeoutMs },
        );
        if (!hit.valid) return kind === "o" ? pixel() : unknownLink();
        if (kind === "o") return pixel();
        return new Response(null, {
          status: 302,
          headers: { Location: hit.url, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer" },
        });
      } catch (err) {
        o.log.warn("tracking: the daemon cannot be asked", { error: (err as Error).message });
        return fallback();
      }
    })();
  };
}
