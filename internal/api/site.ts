import { type ConsoleOptions, consoleHandler } from "../console/handler";
import { assetHandler } from "../web/assets";
import { referenceHandler } from "./reference";
import type { AutomationCalls } from "./campaigns";
import type { SiteHandler } from "./server";
import { unsubscribePages } from "./unsubscribe";

/** What the API process serves to browsers beside the API: the console, the API reference, their assets, the unsubscribe pages. */
export function apiSite(console: ConsoleOptions, automation: AutomationCalls): SiteHandler {
  const assets = assetHandler();
  const reference = referenceHandler();
  const pages = consoleHandler(console);
  const unsubscribe = unsubscribePages(automation, console.timeoutMs, console.log);
  return (req, url, peerIp) => assets(url.pathname) ?? reference(req, url) ?? unsubscribe(req, url) ?? pages(req, url, peerIp);
}
