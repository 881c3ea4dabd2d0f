import { allowOf, findRoute, type Routes } from "../web/routes";
import {
  retryWebhookDelivery,
  showEmail,
  showEmails,
  showWebhookDeliveries,
  showWebhooks,
  testWebhook,
} from "./activity";
import {
  showCampaigns,
  showSubscriber,
  showSubscribers,
  showSuppressions,
  showWorkflow,
  showWorkflows,
} from "./audience";
import type { IpGate } from "../api/server";
import {
  type ConsoleContext,
  type ConsoleOptions,
  type ConsolePorts,
  consoleContext,
  type PageHandler,
} from "./context";
import { addDomain, showDomains, verifyDomain } from "./domains";
import { CONSOLE, messagePage, PATHS } from "./pages";
import { fromAnotherSite, page, pageRequest } from "./request";
import { failure } from "./session";
import { home, showSignIn, signIn, signOut } from "./sign_in";
import { confirmRevoke, createToken, revokeToken, showTokens } from "./tokens";
import { showUsage } from "./usage";

// The console's HTTP side: its route table and the checks every request passes. It keeps
// nothing: the session, its CSRF token and every decision are the daemon's (ConsoleService);
// the session cookie only carries the session token.

/** Every console page: a path (its groups are the parameters) and its handler by method. */
export const CONSOLE_ROUTES: Routes<Partial<Record<string, PageHandler>>> = [
  [/^\/console\/?$/, { GET: home }],
  [/^\/console\/sign-in$/, { GET: showSignIn, POST: signIn }],
  [/^\/console\/sign-out$/, { POST: signOut }],
  [/^\/console\/tokens$/, { GET: showTokens, POST: createToken }],
  [/^\/console\/tokens\/([^/]+)\/revoke$/, { GET: confirmRevoke, POST: revokeToken }],
  [/^\/console\/domains$/, { GET: showDomains, POST: addDomain }],
  [/^\/console\/domains\/([^/]+)\/verify$/, { POST: verifyDomain }],
  [/^\/console\/usage$/, { GET: showUsage }],
  [/^\/console\/emails$/, { GET: showEmails }],
  [/^\/console\/emails\/([^/]+)$/, { GET: showEmail }],
  [/^\/console\/webhooks$/, { GET: showWebhooks }],
  [/^\/console\/webhooks\/([^/]+)\/deliveries$/, { GET: showWebhookDeliveries }],
  [/^\/console\/webhooks\/([^/]+)\/test$/, { POST: testWebhook }],
  [/^\/console\/webhooks\/([^/]+)\/deliveries\/([^/]+)\/retry$/, { POST: retryWebhookDelivery }],
  [/^\/console\/subscribers$/, { GET: showSubscribers }],
  [/^\/console\/subscribers\/([^/]+)$/, { GET: showSubscriber }],
  [/^\/console\/campaigns$/, { GET: showCampaigns }],
  [/^\/console\/workflows$/, { GET: showWorkflows }],
  [/^\/console\/workflows\/([^/]+)$/, { GET: showWorkflow }],
  [/^\/console\/suppressions$/, { GET: showSuppressions }],
];

/**
 * The console under /console; returns undefined for every other path. Every request first counts
 * against its client's IP limit (gate): a page asks the daemon, a sign-in costs it a hash.
 */
export function consoleHandler(
  ports: ConsolePorts,
  o: ConsoleOptions,
  gate: IpGate,
): (req: Request, url: URL, peerIp: string) => Promise<Response> | undefined {
  const cx = consoleContext(ports, o);
  return (req, url, peerIp) => {
    const path = url.pathname;
    if (path !== CONSOLE && !path.startsWith(`${CONSOLE}/`)) return undefined;
    return gate(req, peerIp).then(
      (wait) => (wait === undefined ? consolePage(cx, o, req, url, peerIp) : tooManyRequests(wait)),
      (err) => failure(cx, pageRequest(req, url, peerIp, o.trustProxy), err),
    );
  };
}

/** 429: the client's address sent more than its limit. */
function tooManyRequests(wait: number): Response {
  return page(
    429,
    messagePage("Too many requests", "Too many requests from your address. Try again in a moment.", undefined, {
      href: PATHS.signIn,
      label: "Sign in",
    }),
    { "Retry-After": String(wait) },
  );
}

/** A console request admitted: its route and method, the same-site check of a change, then its handler. */
async function consolePage(
  cx: ConsoleContext,
  o: ConsoleOptions,
  req: Request,
  url: URL,
  peerIp: string,
): Promise<Response> {
  const path = url.pathname;
  const r = pageRequest(req, url, peerIp, o.trustProxy);
  const found = findRoute(CONSOLE_ROUTES, path);
  if (!found) return page(404, messagePage("Not found", `There is no page ${path}.`));
  const { route, params } = found;
  const handler = route[req.method === "HEAD" ? "GET" : req.method];
  if (!handler)
    return page(405, messagePage("Not allowed", `${path} does not accept ${req.method}.`), {
      Allow: allowOf(Object.keys(route)),
    });
  if (req.method === "POST" && fromAnotherSite(r))
    return page(403, messagePage("Refused", "This form was sent from another site."));
  return handler(cx, r, params).catch((err) => failure(cx, r, err));
}
