import type { ConsoleOptions, ConsolePorts } from "../console/context";
import { consoleHandler } from "../console/handler";
import type { AdmissionPort } from "../api/ports";
import { ASSETS_PATH, assetHandler } from "../web/assets";
import { pageHeaders } from "../web/headers";
import { OPENAPI_PATH } from "../api/openapi/service";
import { referenceHandler } from "./reference";
import { DOCS_PATH, ipGate, READY_PATH, type SiteHandler } from "../api/server";
import { getOnly } from "../api/respond";
import { rateLimitDocsPage } from "./docs";
import { type TrackingCalls, trackingPages } from "./tracking";
import { type UnsubscribeCalls, unsubscribePages } from "./unsubscribe";
import { landingPage, notFoundPage, wantsHtml } from "./landing";

const API_PREFIX = "/api/";

/** The daemon's calls the pages make: the console's, and the unsubscribe pages' beside them. */
export interface SitePorts extends ConsolePorts {
  /** The API's admission: the unsubscribe pages, which anyone may call, count against the client IP's limit through it (an admission without a token). */
  admission: AdmissionPort;
  automation: ConsolePorts["automation"] & UnsubscribeCalls;
  tracking: TrackingCalls;
}

/**
 * What the API process serves to browsers beside the API: the rate-limit page, the console, the API
 * reference, their assets, the unsubscribe pages.
 */
export function apiSite(ports: SitePorts, o: ConsoleOptions): SiteHandler {
  const docsPage = rateLimitDocsPage();
  const landing = landingPage();
  const assets = assetHandler();
  const reference = referenceHandler();
  const gate = ipGate(ports.admission, o.trustProxy);
  const pages = consoleHandler(ports, o, gate);
  const unsubscribe = unsubscribePages(ports.automation, gate, o.timeoutMs, o.log);
  const tracked = trackingPages(ports.tracking, gate, o);
  return (req, url, peerIp) => {
    const path = url.pathname;
    if (path === DOCS_PATH) return getOnly(req, path, () => new Response(docsPage, { headers: pageHeaders() }));
    // The API's own paths are not pages: answered without asking each page handler (the hot path).
    if (path.startsWith(API_PREFIX) && path !== OPENAPI_PATH) return undefined;
    const asset = assets(path);
    if (asset) return getOnly(req, path, () => asset);
    if (path === "/") return getOnly(req, path, () => new Response(landing, { headers: pageHeaders() }));
    // Browsers ask for it whatever the page's icon link says.
    if (path === "/favicon.ico")
      return getOnly(
        req,
        path,
        () => new Response(null, { status: 301, headers: { Location: `${ASSETS_PATH}favicon.svg` } }),
      );
    const page =
      reference(req, url) ?? unsubscribe(req, url, peerIp) ?? tracked(req, url, peerIp) ?? pages(req, url, peerIp);
    if (page) return page;
    // A browser's request for a path that is nothing gets a page; an API client gets the API's answer.
    if (path !== READY_PATH && wantsHtml(req))
      return new Response(notFoundPage(path), { status: 404, headers: pageHeaders() });
    return undefined;
  };
}
