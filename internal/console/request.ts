import { randomBytes } from "node:crypto";
import { clientIp, normalizeIp } from "../clientip/clientip";
import { pageHeaders } from "../web/headers";
import { CONSOLE, messagePage, NOTICES, type Notice } from "./pages";

// A console request as the page handlers see it, and the HTTP they share: pages and
// redirects, the cookies, forms, path parameters and the notice after a change.

/** The session cookie: it carries the session token and nothing else (the session is the daemon's). */
export const SESSION_COOKIE = "mc_session";
/** Before sign-in there is no session: the sign-in form's CSRF token is a cookie of its own (double submit, SameSite=Strict). */
export const SIGN_IN_COOKIE = "mc_signin";
export const SIGN_IN_COOKIE_S = 3_600;

/** A request to the console. */
export interface PageRequest {
  req: Request;
  url: URL;
  /** The client's address (through a trusted proxy, the one it names). */
  ip: string;
  /** Whether the browser talks TLS: to this process, or to a trusted proxy in front of it. */
  secure: boolean;
  cookies: Bun.CookieMap;
}

/** A console request from what the server was given. */
export function pageRequest(req: Request, url: URL, peerIp: string, trustProxy: readonly string[]): PageRequest {
  const trustedPeer = trustProxy.includes(normalizeIp(peerIp));
  return {
    req,
    url,
    ip: clientIp(peerIp, req.headers.get("x-forwarded-for"), trustProxy),
    secure:
      url.protocol === "https:" ||
      (trustedPeer && req.headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "https"),
    cookies: new Bun.CookieMap(req.headers.get("cookie") ?? ""),
  };
}

/** Whether a change was sent from a page of another origin (besides its CSRF token, a change must come from ours). */
export function fromAnotherSite(r: PageRequest): boolean {
  const origin = r.req.headers.get("origin");
  return origin !== null && origin !== `${r.secure ? "https" : "http"}://${r.req.headers.get("host")}`;
}

/** A page; never cached. */
export function page(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, { status, headers: pageHeaders({ "Cache-Control": "no-store", ...headers }) });
}

/** 303 to another page, setting the cookies given. */
export function redirect(to: string, cookies: string[] = []): Response {
  const headers = new Headers({ Location: to, "Cache-Control": "no-store" });
  for (const c of cookies) headers.append("Set-Cookie", c);
  return new Response(null, { status: 303, headers });
}

/**
 * A console cookie's name on this request. Over TLS it has the __Host- prefix, which a browser
 * keeps only when the cookie is Secure, for Path=/ and for this very host (no Domain): a page of
 * a sibling subdomain, or one served in cleartext, can neither set nor shadow it. Without TLS
 * the plain name (a browser refuses the prefix on a cookie that is not Secure).
 */
export function cookieName(r: PageRequest, name: string): string {
  return r.secure ? `__Host-${name}` : name;
}

/**
 * A Set-Cookie of the console's, out of scripts' reach. Over TLS: Secure, __Host- and for the
 * whole host (the prefix's rule); without: for the console's paths only. maxAge 0 clears it.
 */
export function cookie(
  r: PageRequest,
  name: string,
  value: string,
  maxAge: number,
  sameSite: "lax" | "strict",
): string {
  return new Bun.Cookie(cookieName(r, name), value, {
    path: r.secure ? "/" : CONSOLE,
    httpOnly: true,
    sameSite,
    secure: r.secure,
    maxAge,
  }).serialize();
}

/** The session token the request carries; "" without one. */
export const sessionToken = (r: PageRequest) => r.cookies.get(cookieName(r, SESSION_COOKIE)) ?? "";

/** What the request's sign-in cookie holds; "" without one. */
export const signInCookie = (r: PageRequest) => r.cookies.get(cookieName(r, SIGN_IN_COOKIE)) ?? "";

/** The sign-in form's CSRF token: the one of its cookie when that is one of ours, a new one otherwise. */
export function signInCsrf(r: PageRequest): string {
  const have = signInCookie(r);
  return /^[A-Za-z0-9_-]{43}$/.test(have) ? have : randomBytes(32).toString("base64url");
}

/** A path parameter as it was meant; a malformed escape stays as it is (and names nothing). */
export function pathParam(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

const TOKEN_ID = /^tok_[0-9a-f]{16}$/;

/** The notice a redirect after a change asks for (?done=); the text is ours, never the URL's. */
export function noticeOf(url: URL): Notice | undefined {
  const done = url.searchParams.get("done") ?? "";
  // Which token was revoked: its id, when the link carries one that is shaped like an id.
  const id = url.searchParams.get("token") ?? "";
  if (done === "revoked" && TOKEN_ID.test(id))
    return { kind: "ok", text: `The token ${id} was revoked. The API refuses it from the next request on.` };
  const text = NOTICES[done];
  return text ? { kind: "ok", text } : undefined;
}

export type Form = Awaited<ReturnType<Request["formData"]>>;

const FORM_TYPES = /^(application\/x-www-form-urlencoded|multipart\/form-data)\s*(;|$)/i;

/** The request's form, or the page saying why it is not one (415, 400). */
export async function readForm(r: PageRequest): Promise<Form | Response> {
  if (!FORM_TYPES.test(r.req.headers.get("content-type") ?? ""))
    return page(415, messagePage("Not a form", "Send the form as application/x-www-form-urlencoded."));
  try {
    return await r.req.formData();
  } catch {
    return page(400, messagePage("Not a form", "The form could not be read."));
  }
}

/** A form's text field; "" when it is missing or a file. */
export function field(f: Form, name: string): string {
  const v = f.get(name);
  return typeof v === "string" ? v : "";
}
