import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import type { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import type { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { InvalidField } from "../api/emails";
import { DEFAULT_LIMIT } from "../api/routing";
import { MAX_EMAIL, tagName } from "../api/subscribers";
import { clientIp, normalizeIp } from "../clientip/clientip";
import { type ConsoleService, type GetSessionResponse, SignInOutcome } from "../gen/mailcore/limiter/v1/console_pb";
import type { MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import type { WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import { emailFilters } from "../api/activity";
import { apiContracts } from "../api/contract";
import {
  deliveryFigures,
  type EmailFilterForm,
  emailPage,
  emailsPage,
  webhookDeliveriesPage,
  webhooksPage,
} from "./activity_pages";
import type { Logger } from "../log/log";
import { sameSecret } from "../token/token";
import { pageHeaders } from "../web/headers";
import { allowOf, findRoute } from "../web/routes";
import {
  CONSOLE,
  domainsPage,
  messagePage,
  NOTICES,
  type Notice,
  PATHS,
  revokeTokenPage,
  signInPage,
  tokensPage,
  usagePage,
} from "./pages";
import { campaignsPage, subscriberPage, subscribersPage, workflowPage, workflowsPage } from "./audience_pages";

// The console's HTTP side: routes, cookies, the checks of every change, and the mapping of the
// daemon's answers to pages. It keeps nothing: the session, its CSRF token and every decision
// are the daemon's (ConsoleService); the session cookie only carries the session token.

const SESSION_COOKIE = "mc_session";
/** Before sign-in there is no session: the sign-in form's CSRF token is a cookie of its own (double submit, SameSite=Strict). */
const SIGN_IN_COOKIE = "mc_signin";
const SIGN_IN_COOKIE_S = 3_600;
/** Sign-in hashes with argon2id and Verify asks DNS: both take longer than an admission. */
const SLOW_CALL_MS = 10_000;
const EMAILS_PER_PAGE = 25;
const WEBHOOKS_PER_PAGE = 10;
const DELIVERIES_PER_WEBHOOK = 10;
const HOUR_MS = 3_600_000;

/** The hours the usage page's figures need: the last 30 days and this month, to the end of this hour. */
function figuresRange(nowMs: number) {
  const now = new Date(nowMs);
  const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const dayStart = Math.floor(nowMs / 86_400_000) * 86_400_000;
  const since = Math.min(monthStart, dayStart - 29 * 86_400_000);
  return { sinceMs: BigInt(since), untilMs: BigInt(Math.floor(nowMs / HOUR_MS) * HOUR_MS + HOUR_MS) };
}

/** What a datetime input sends: a UTC time (the page says so) without a zone, to the minute or the second. */
const DATETIME_INPUT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/;

/** A datetime input's value as RFC 3339 (UTC); any other value as it is, for the API's check to refuse or take. */
function rfc3339(value: string): string {
  if (!DATETIME_INPUT.test(value)) return value;
  return `${value}${value.length === 16 ? ":00" : ""}Z`;
}

const FORM_TYPES = /^(application\/x-www-form-urlencoded|multipart\/form-data)\s*(;|$)/i;

export interface ConsoleOptions {
  daemon: Client<typeof ConsoleService>;
  /** The audience and automation are read with the session's organization (the daemon's answer, never the request's). */
  audience: Client<typeof AudienceService>;
  automation: Client<typeof AutomationService>;
  /** The activity log, the delivery figures and the webhooks, asked for the session's organization. */
  mail: Pick<Client<typeof MailService>, "listMessages" | "getMessage" | "getMessageStats">;
  webhooks: Pick<
    Client<typeof WebhookService>,
    "listWebhooks" | "listWebhookDeliveries" | "testWebhook" | "retryWebhookDelivery"
  >;
  timeoutMs: number;
  trustProxy: readonly string[];
  log: Logger;
}

type Form = Awaited<ReturnType<Request["formData"]>>;

interface Ctx {
  req: Request;
  url: URL;
  ip: string;
  secure: boolean;
  cookies: Bun.CookieMap;
}

function page(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, { status, headers: pageHeaders({ "Cache-Control": "no-store", ...headers }) });
}

function redirect(to: string, cookies: string[] = []): Response {
  const headers = new Headers({ Location: to, "Cache-Control": "no-store" });
  for (const c of cookies) headers.append("Set-Cookie", c);
  return new Response(null, { status: 303, headers });
}

function cookie(ctx: Ctx, name: string, value: string, maxAge: number, sameSite: "lax" | "strict"): string {
  return new Bun.Cookie(name, value, {
    path: CONSOLE,
    httpOnly: true,
    sameSite,
    secure: ctx.secure,
    maxAge,
  }).serialize();
}

/** A path parameter as it was meant; a malformed escape stays as it is (and names nothing). */
function pathParam(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

const TOKEN_ID = /^tok_[0-9a-f]{16}$/;

/** What is wrong with the subscribers' filters, as the API says it; undefined when nothing is. */
function filterRefusal(emailPrefix: string, tag: string): string | undefined {
  // A prefix longer than an address can be is a mistake.
  if (emailPrefix.length > MAX_EMAIL)
    return `The email prefix is longer than an address can be (${MAX_EMAIL} characters).`;
  if (tag === "") return undefined;
  try {
    tagName("tag", tag);
    return undefined;
  } catch (err) {
    if (err instanceof InvalidField) return `${err.message}.`;
    throw err;
  }
}

const noticeOf = (url: URL): Notice | undefined => {
  const done = url.searchParams.get("done") ?? "";
  // Which token was revoked: its id, when the link carries one that is shaped like an id.
  const id = url.searchParams.get("token") ?? "";
  if (done === "revoked" && TOKEN_ID.test(id))
    return { kind: "ok", text: `The token ${id} was revoked. The API refuses it from the next request on.` };
  const text = NOTICES[done];
  return text ? { kind: "ok", text } : undefined;
};

/** The console under /console; returns undefined for every other path. */
export function consoleHandler(
  o: ConsoleOptions,
): (req: Request, url: URL, peerIp: string) => Promise<Response> | undefined {
  const { daemon, audience, automation } = o;
  const call = { timeoutMs: o.timeoutMs };
  const slow = { timeoutMs: Math.max(o.timeoutMs, SLOW_CALL_MS) };
  /** One page of a list, as long as the API's default page: the cursor of the link that asked for it. */
  const paging = (ctx: Ctx) => ({ limit: DEFAULT_LIMIT, cursor: ctx.url.searchParams.get("cursor") ?? "" });
  /** A page that reads the records: a filter or cursor the daemon refuses is a page saying why (422). */
  const reading = (ctx: Ctx, run: (s: GetSessionResponse) => Promise<string>) =>
    signedIn(ctx, async (s) => {
      try {
        return page(200, await run(s));
      } catch (err) {
        if (!(err instanceof ConnectError) || err.code !== Code.InvalidArgument) throw err;
        const q = ctx.url.searchParams;
        if (!q.has("cursor") || !/cursor/.test(err.rawMessage))
          return page(422, messagePage("Not shown", `${err.rawMessage}.`, s));
        // Only a link that was changed or cut short carries such a cursor: the list itself is there.
        const first = new URLSearchParams([...q].filter(([name]) => name !== "cursor"));
        const text = `This link asks for a page the list never gave (${err.rawMessage}): it was changed or cut short. The list starts on its first page.`;
        return page(
          422,
          messagePage("No such page", text, s, {
            href: first.size ? `${ctx.url.pathname}?${first}` : ctx.url.pathname,
            label: "First page",
          }),
        );
      }
    });

  const sessionToken = (ctx: Ctx) => ctx.cookies.get(SESSION_COOKIE) ?? "";
  const signedOut = (ctx: Ctx, done: string) =>
    redirect(`${PATHS.signIn}?done=${done}`, [cookie(ctx, SESSION_COOKIE, "", 0, "lax")]);

  /** The daemon's refusals as pages; anything else is a failure of the daemon. */
  const failure = (ctx: Ctx, err: unknown, session?: GetSessionResponse): Response => {
    if (err instanceof ConnectError) {
      switch (err.code) {
        case Code.Unauthenticated:
          return signedOut(ctx, "expired");
        case Code.PermissionDenied:
          return page(
            403,
            messagePage(
              "Refused",
              "This form is not valid any more: it carries no CSRF token, or one of another session. Go back, reload the page and try again.",
              session,
            ),
          );
        case Code.NotFound:
          return page(404, messagePage("Not found", err.rawMessage, session));
        case Code.InvalidArgument:
        case Code.AlreadyExists:
          return page(400, messagePage("Not done", err.rawMessage, session));
      }
    }
    o.log.warn("console: daemon call failed", { path: ctx.url.pathname, error: (err as Error).message });
    return page(
      503,
      messagePage(
        "Unavailable",
        "The service cannot be reached right now; nothing was changed. Try again in a moment.",
        session,
      ),
      { "Retry-After": "1" },
    );
  };

  const form = async (ctx: Ctx): Promise<Form | Response> => {
    if (!FORM_TYPES.test(ctx.req.headers.get("content-type") ?? ""))
      return page(415, messagePage("Not a form", "Send the form as application/x-www-form-urlencoded."));
    try {
      return await ctx.req.formData();
    } catch {
      return page(400, messagePage("Not a form", "The form could not be read."));
    }
  };
  const field = (f: Form, name: string) => {
    const v = f.get(name);
    return typeof v === "string" ? v : "";
  };

  /** Runs a page that needs a session: the session first, then the page (with its failures as pages). */
  const signedIn = async (
    ctx: Ctx,
    run: (s: GetSessionResponse, token: string) => Promise<Response>,
  ): Promise<Response> => {
    const token = sessionToken(ctx);
    let s: GetSessionResponse;
    try {
      s = await daemon.getSession({ sessionToken: token }, call);
    } catch (err) {
      return failure(ctx, err);
    }
    try {
      return await run(s, token);
    } catch (err) {
      return failure(ctx, err, s);
    }
  };
  /** A change: a form with the session's CSRF token (the daemon checks it). */
  const change = (ctx: Ctx, run: (s: GetSessionResponse, token: string, f: Form, csrf: string) => Promise<Response>) =>
    signedIn(ctx, async (s, token) => {
      const f = await form(ctx);
      if (f instanceof Response) return f;
      return run(s, token, f, field(f, "csrf"));
    });

  const signInForm = (ctx: Ctx, status: number, notice?: Notice, email?: string) => {
    const have = ctx.cookies.get(SIGN_IN_COOKIE) ?? "";
    const csrf = /^[A-Za-z0-9_-]{43}$/.test(have) ? have : randomBytes(32).toString("base64url");
    return page(status, signInPage({ csrf, email, notice }), {
      "Set-Cookie": cookie(ctx, SIGN_IN_COOKIE, csrf, SIGN_IN_COOKIE_S, "strict"),
    });
  };

  const tokensView = async (
    s: GetSessionResponse,
    token: string,
    status: number,
    extra: Partial<Parameters<typeof tokensPage>[0]> = {},
  ) => {
    const { tokens } = await daemon.listApiTokens({ sessionToken: token }, call);
    return page(status, tokensPage({ session: s, tokens, ...extra }));
  };
  const domainsView = async (
    s: GetSessionResponse,
    token: string,
    status: number,
    extra: Partial<Parameters<typeof domainsPage>[0]> = {},
  ) => {
    const { domains } = await daemon.listDomains({ sessionToken: token }, call);
    return page(status, domainsPage({ session: s, domains, ...extra }));
  };

  /** A change the console makes through the API's RPCs: its CSRF token is checked here, against the session's. */
  const ownChange = (ctx: Ctx, run: (s: GetSessionResponse) => Promise<Response>) =>
    change(ctx, async (s, _token, _f, csrf) => {
      if (!sameSecret(csrf, s.csrfToken)) throw new ConnectError("bad CSRF token", Code.PermissionDenied);
      return run(s);
    });

  const webhooksView = async (s: GetSessionResponse, ctx: Ctx, n?: Notice) => {
    const cursor = ctx.url.searchParams.get("cursor") ?? "";
    const list = await o.webhooks.listWebhooks({ orgId: s.orgId, limit: WEBHOOKS_PER_PAGE, cursor }, call);
    const endpoints = await Promise.all(
      list.endpoints.map(async (endpoint) => {
        const got = await o.webhooks.listWebhookDeliveries(
          { orgId: s.orgId, webhookId: endpoint.id, limit: DELIVERIES_PER_WEBHOOK },
          call,
        );
        return { endpoint, deliveries: got.deliveries, nextCursor: got.nextCursor };
      }),
    );
    return webhooksPage({ session: s, endpoints, nextCursor: list.nextCursor, notice: n ?? noticeOf(ctx.url) });
  };

  type Handler = (ctx: Ctx, params: string[]) => Promise<Response>;
  const routes: [RegExp, Partial<Record<string, Handler>>][] = [
    [
      /^\/console\/?$/,
      {
        GET: async (ctx) => redirect(sessionToken(ctx) ? PATHS.tokens : PATHS.signIn),
      },
    ],
    [
      /^\/console\/sign-in$/,
      {
        GET: async (ctx) => {
          const token = sessionToken(ctx);
          if (
            token &&
            (await daemon.getSession({ sessionToken: token }, call).then(
              () => true,
              () => false,
            ))
          )
            return redirect(PATHS.tokens);
          return signInForm(ctx, 200, noticeOf(ctx.url));
        },
        POST: async (ctx) => {
          const f = await form(ctx);
          if (f instanceof Response) return f;
          const email = field(f, "email");
          if (!sameSecret(field(f, "csrf"), ctx.cookies.get(SIGN_IN_COOKIE) ?? "")) {
            return signInForm(
              ctx,
              403,
              { kind: "error", text: "The sign-in form had expired. It is fresh now: sign in again." },
              email,
            );
          }
          let res: Awaited<ReturnType<typeof daemon.signIn>>;
          try {
            res = await daemon.signIn({ email, password: field(f, "password"), clientIp: ctx.ip }, slow);
          } catch (err) {
            return failure(ctx, err);
          }
          switch (res.outcome) {
            case SignInOutcome.SIGNED_IN:
              return redirect(PATHS.tokens, [
                cookie(ctx, SESSION_COOKIE, res.sessionToken, res.maxAgeSeconds, "lax"),
                cookie(ctx, SIGN_IN_COOKIE, "", 0, "strict"),
              ]);
            case SignInOutcome.THROTTLED: {
              const minutes = Math.ceil(res.retryAfterSeconds / 60);
              const text = `Too many failed sign-ins from this address or for this account. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`;
              const r = signInForm(ctx, 429, { kind: "error", text }, email);
              r.headers.set("Retry-After", String(res.retryAfterSeconds));
              return r;
            }
            default:
              return signInForm(ctx, 401, { kind: "error", text: "The email or the password is wrong." }, email);
          }
        },
      },
    ],
    [
      /^\/console\/sign-out$/,
      {
        POST: (ctx) =>
          change(ctx, async (_s, token, _f, csrf) => {
            await daemon.signOut({ sessionToken: token, csrfToken: csrf }, call);
            return signedOut(ctx, "signed-out");
          }),
      },
    ],
    [
      /^\/console\/tokens$/,
      {
        GET: (ctx) => signedIn(ctx, (s, token) => tokensView(s, token, 200, { notice: noticeOf(ctx.url) })),
        POST: (ctx) =>
          change(ctx, async (s, token, f, csrf) => {
            const name = field(f, "name");
            try {
              const made = await daemon.createApiToken({ sessionToken: token, csrfToken: csrf, name }, call);
              return await tokensView(s, token, 201, { created: { token: made.token, name: made.info!.name } });
            } catch (err) {
              if (err instanceof ConnectError && err.code === Code.InvalidArgument)
                return tokensView(s, token, 422, { notice: { kind: "error", text: err.rawMessage }, name });
              throw err;
            }
          }),
      },
    ],
    [
      /^\/console\/tokens\/([^/]+)\/revoke$/,
      {
        // Asks first, naming the token.
        GET: (ctx, [id]) =>
          signedIn(ctx, async (s, token) => {
            const tokenId = pathParam(id!);
            const { tokens } = await daemon.listApiTokens({ sessionToken: token }, call);
            const found = tokens.find((t) => t.id === tokenId);
            if (!found) return page(404, messagePage("Not found", `There is no active token ${tokenId}.`, s));
            return page(200, revokeTokenPage({ session: s, token: found }));
          }),
        POST: (ctx, [id]) =>
          change(ctx, async (_s, token, _f, csrf) => {
            const tokenId = pathParam(id!);
            await daemon.revokeApiToken({ sessionToken: token, csrfToken: csrf, tokenId }, call);
            return redirect(`${PATHS.tokens}?${new URLSearchParams({ done: "revoked", token: tokenId })}`);
          }),
      },
    ],
    [
      /^\/console\/domains$/,
      {
        GET: (ctx) => signedIn(ctx, (s, token) => domainsView(s, token, 200, { notice: noticeOf(ctx.url) })),
        POST: (ctx) =>
          change(ctx, async (s, token, f, csrf) => {
            const domain = field(f, "domain");
            try {
              await daemon.addSendingDomain({ sessionToken: token, csrfToken: csrf, domain }, call);
              return redirect(`${PATHS.domains}?done=added`);
            } catch (err) {
              if (
                err instanceof ConnectError &&
                (err.code === Code.InvalidArgument || err.code === Code.AlreadyExists)
              ) {
                return domainsView(s, token, err.code === Code.InvalidArgument ? 422 : 409, {
                  notice: { kind: "error", text: err.rawMessage },
                  domain,
                });
              }
              throw err;
            }
          }),
      },
    ],
    [
      /^\/console\/domains\/([^/]+)\/verify$/,
      {
        POST: (ctx, [name]) =>
          change(ctx, async (s, token, _f, csrf) => {
            const res = await daemon.verifyDomain(
              { sessionToken: token, csrfToken: csrf, domain: pathParam(name!) },
              slow,
            );
            if (res.domain?.verified) return redirect(`${PATHS.domains}?done=verified`);
            return domainsView(s, token, 422, { failed: { name: res.domain!.name, detail: res.detail } });
          }),
      },
    ],
    [
      /^\/console\/usage$/,
      {
        GET: (ctx) =>
          signedIn(ctx, async (s, token) => {
            const nowMs = Date.now();
            const [usage, stats] = await Promise.all([
              daemon.getUsage({ sessionToken: token }, call),
              o.mail.getMessageStats({ orgId: s.orgId, ...figuresRange(nowMs) }, call),
            ]);
            return page(200, usagePage({ session: s, usage, figures: deliveryFigures(stats.hours, nowMs) }));
          }),
      },
    ],
    [
      /^\/console\/emails$/,
      {
        GET: (ctx) => {
          const q = ctx.url.searchParams;
          const value = (name: string) => (q.get(name) ?? "").trim();
          const form: EmailFilterForm = {
            status: value("status"),
            lane: value("lane"),
            to: value("to"),
            tag: value("tag"),
            after: rfc3339(value("after")),
            before: rfc3339(value("before")),
          };
          let filters: ReturnType<typeof emailFilters>;
          try {
            // Checked as the API checks GET /api/v1/emails, so a refusal is said in the API's words.
            const asked = new URLSearchParams(Object.entries(form).filter(([, v]) => v !== ""));
            apiContracts().get("GET /api/v1/emails")!.parameters([], asked);
            filters = emailFilters(asked);
          } catch (err) {
            if (!(err instanceof InvalidField)) throw err;
            const text = `${err.message}.`;
            return signedIn(ctx, async (s) =>
              page(
                422,
                emailsPage({
                  session: s,
                  filters: form,
                  messages: [],
                  nextCursor: "",
                  notice: { kind: "error", text },
                }),
              ),
            );
          }
          return reading(ctx, async (s) => {
            const res = await o.mail.listMessages(
              { orgId: s.orgId, limit: EMAILS_PER_PAGE, cursor: q.get("cursor") ?? "", ...filters },
              call,
            );
            return emailsPage({ session: s, filters: form, messages: res.messages, nextCursor: res.nextCursor });
          });
        },
      },
    ],
    [
      /^\/console\/emails\/([^/]+)$/,
      {
        GET: (ctx, [id]) =>
          signedIn(ctx, async (s) => {
            const { message } = await o.mail.getMessage({ orgId: s.orgId, messageId: pathParam(id!) }, call);
            return page(200, emailPage({ session: s, message: message! }));
          }),
      },
    ],
    [/^\/console\/webhooks$/, { GET: (ctx) => reading(ctx, (s) => webhooksView(s, ctx)) }],
    [
      /^\/console\/webhooks\/([^/]+)\/deliveries$/,
      {
        GET: (ctx, [id]) =>
          reading(ctx, async (s) => {
            const webhookId = pathParam(id!);
            const cursor = ctx.url.searchParams.get("cursor") ?? "";
            const got = await o.webhooks.listWebhookDeliveries(
              { orgId: s.orgId, webhookId, limit: DELIVERIES_PER_WEBHOOK, cursor },
              call,
            );
            return webhookDeliveriesPage({ session: s, webhookId, cursor, ...got });
          }),
      },
    ],
    [
      /^\/console\/webhooks\/([^/]+)\/test$/,
      {
        POST: (ctx, [id]) =>
          ownChange(ctx, async (s) => {
            await o.webhooks.testWebhook({ orgId: s.orgId, webhookId: pathParam(id!) }, call);
            return redirect(`${PATHS.webhooks}?done=tested`);
          }),
      },
    ],
    [
      /^\/console\/webhooks\/([^/]+)\/deliveries\/([^/]+)\/retry$/,
      {
        POST: (ctx, [id, deliveryId]) =>
          ownChange(ctx, async (s) => {
            try {
              await o.webhooks.retryWebhookDelivery(
                { orgId: s.orgId, webhookId: pathParam(id!), deliveryId: pathParam(deliveryId!) },
                call,
              );
            } catch (err) {
              if (err instanceof ConnectError && err.code === Code.FailedPrecondition)
                return page(409, await webhooksView(s, ctx, { kind: "error", text: `${err.rawMessage}.` }));
              throw err;
            }
            return redirect(`${PATHS.webhooks}?done=replayed`);
          }),
      },
    ],
    [
      /^\/console\/subscribers$/,
      {
        GET: (ctx) => {
          const filter = { email: ctx.url.searchParams.get("email") ?? "", tag: ctx.url.searchParams.get("tag") ?? "" };
          const [email, tag] = [filter.email.trim(), filter.tag.trim()];
          const refused = filterRefusal(email, tag);
          if (refused)
            return signedIn(ctx, async (s) =>
              page(
                422,
                subscribersPage({
                  session: s,
                  subscribers: [],
                  filter,
                  paged: { cursor: "", nextCursor: "" },
                  notice: { kind: "error", text: refused },
                }),
              ),
            );
          return reading(ctx, async (s) => {
            const p = paging(ctx);
            const res = await audience.listSubscribers({ orgId: s.orgId, ...p, emailPrefix: email, tag }, slow);
            return subscribersPage({
              session: s,
              subscribers: res.subscribers,
              filter,
              paged: { cursor: p.cursor, nextCursor: res.nextCursor },
            });
          });
        },
      },
    ],
    [
      /^\/console\/subscribers\/([^/]+)$/,
      {
        GET: (ctx, [id]) =>
          reading(ctx, async (s) => {
            const ref = { orgId: s.orgId, ref: pathParam(id!) };
            const p = paging(ctx);
            const [{ subscriber }, res] = await Promise.all([
              audience.getSubscriber(ref, slow),
              audience.listSubscriberEvents({ ...ref, ...p }, slow),
            ]);
            return subscriberPage({
              session: s,
              subscriber: subscriber!,
              events: res.events,
              paged: { cursor: p.cursor, nextCursor: res.nextCursor },
            });
          }),
      },
    ],
    [
      /^\/console\/campaigns$/,
      {
        GET: (ctx) =>
          reading(ctx, async (s) => {
            const p = paging(ctx);
            const res = await automation.listCampaigns({ orgId: s.orgId, ...p }, slow);
            return campaignsPage({
              session: s,
              campaigns: res.campaigns,
              paged: { cursor: p.cursor, nextCursor: res.nextCursor },
            });
          }),
      },
    ],
    [
      /^\/console\/workflows$/,
      {
        GET: (ctx) =>
          reading(ctx, async (s) => {
            const p = paging(ctx);
            const res = await automation.listWorkflows({ orgId: s.orgId, ...p }, slow);
            return workflowsPage({
              session: s,
              workflows: res.workflows,
              paged: { cursor: p.cursor, nextCursor: res.nextCursor },
            });
          }),
      },
    ],
    [
      /^\/console\/workflows\/([^/]+)$/,
      {
        GET: (ctx, [id]) =>
          reading(ctx, async (s) => {
            const workflowId = pathParam(id!);
            const p = paging(ctx);
            const [{ workflow }, res] = await Promise.all([
              automation.getWorkflow({ orgId: s.orgId, id: workflowId }, slow),
              automation.listWorkflowRuns({ orgId: s.orgId, workflowId, ...p }, slow),
            ]);
            return workflowPage({
              session: s,
              workflow: workflow!,
              runs: res.runs,
              paged: { cursor: p.cursor, nextCursor: res.nextCursor },
            });
          }),
      },
    ],
  ];

  return (req, url, peerIp) => {
    const path = url.pathname;
    if (path !== CONSOLE && !path.startsWith(`${CONSOLE}/`)) return undefined;
    const trustedPeer = o.trustProxy.includes(normalizeIp(peerIp));
    const ctx: Ctx = {
      req,
      url,
      ip: clientIp(peerIp, req.headers.get("x-forwarded-for"), o.trustProxy),
      // Secure cookies when the browser talks TLS: to this process, or to a trusted proxy in front of it.
      secure:
        url.protocol === "https:" ||
        (trustedPeer && req.headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "https"),
      cookies: new Bun.CookieMap(req.headers.get("cookie") ?? ""),
    };
    const found = findRoute(routes, path);
    if (!found) return Promise.resolve(page(404, messagePage("Not found", `There is no page ${path}.`)));
    const { route, params } = found;
    const handler = route[req.method === "HEAD" ? "GET" : req.method];
    if (!handler)
      return Promise.resolve(
        page(405, messagePage("Not allowed", `${path} does not accept ${req.method}.`), {
          Allow: allowOf(Object.keys(route)),
        }),
      );
    if (req.method === "POST") {
      // A change must come from a page of this origin (besides its CSRF token).
      const origin = req.headers.get("origin");
      if (origin !== null && origin !== `${ctx.secure ? "https" : "http"}://${req.headers.get("host")}`) {
        return Promise.resolve(page(403, messagePage("Refused", "This form was sent from another site.")));
      }
    }
    return handler(ctx, params).catch((err) => failure(ctx, err));
  };
}
