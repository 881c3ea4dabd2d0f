import { allowOf, findRoute, type Routes } from "../web/routes";
import {
  retryWebhookDelivery,
  showEmail,
  showEmails,
  showWebhookDeliveries,
  showWebhooks,
  testWebhook,
} from "./activity";
import { showCampaigns, showSubscriber, showSubscribers, showWorkflow, showWorkflows } from "./audience";
import { type ConsoleOptions, type ConsolePorts, consoleContext, type PageHandler } from "./context";
import { addDomain, showDomains, verifyDomain } from "./domains";
import { CONSOLE, messagePage } from "./pages";
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
];

/** The console under /console; returns undefined for every other path. */
export function consoleHandler(
  ports: ConsolePorts,
  o: ConsoleOptions,
): (req: Request, url: URL, peerIp: string) => Promise<Response> | undefined {
  const cx = consoleContext(ports, o);
  return (req, url, peerIp) => {
    const path = url.pathname;
    if (path !== CONSOLE && !path.startsWith(`${CONSOLE}/`)) return undefined;
    const r = pageRequest(req, url, peerIp, o.trustProxy);
    const found = findRoute(CONSOLE_ROUTES, path);
    if (!found) return Promise.resolve(page(404, messagePage("Not found", `There is no page ${path}.`)));
    const { route, params } = found;
    const handler = route[req.method === "HEAD" ? "GET" : req.method];
    if (!handler)
      return Promise.resolve(
        page(405, messagePage("Not allowed", `${path} does not accept ${req.method}.`), {
          Allow: allowOf(Object.keys(route)),
        }),
      );
    if (req.method === "POST" && fromAnotherSite(r))
      return Promise.resolve(page(403, messagePage("Refused", "This form was sent from another site.")));
    return handler(cx, r, params).catch((err) => failure(cx, r, err));
  };
}
