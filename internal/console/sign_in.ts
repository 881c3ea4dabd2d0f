import { SignInOutcome } from "../gen/mailcore/limiter/v1/console_pb";
import { sameSecret } from "../token/token";
import type { ConsoleContext } from "./context";
import { type Notice, PATHS, signInPage } from "./pages";
import {
  cookie,
  field,
  noticeOf,
  type PageRequest,
  page,
  readForm,
  redirect,
  SESSION_COOKIE,
  SIGN_IN_COOKIE,
  SIGN_IN_COOKIE_S,
  sessionToken,
  signInCookie,
  signInCsrf,
} from "./request";
import { change, failure, signedOut } from "./session";

// Signing in and out: the sign-in form's own CSRF cookie, the daemon's verdict on the password,
// and the session cookie it hands out.

/** The sign-in form, with its CSRF cookie (kept when the browser has one of ours). */
function signInForm(r: PageRequest, status: number, notice?: Notice, email?: string): Response {
  const csrf = signInCsrf(r);
  return page(status, signInPage({ csrf, email, notice }), {
    "Set-Cookie": cookie(r, SIGN_IN_COOKIE, csrf, SIGN_IN_COOKIE_S, "strict"),
  });
}

/** GET /console: the tokens with a session cookie, the sign-in form without. */
export async function home(_cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return redirect(sessionToken(r) ? PATHS.tokens : PATHS.signIn);
}

/** GET /console/sign-in: the form; a live session goes on to the tokens. */
export async function showSignIn(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  const token = sessionToken(r);
  if (
    token &&
    (await cx.ports.console.getSession({ sessionToken: token }, cx.call).then(
      () => true,
      () => false,
    ))
  )
    return redirect(PATHS.tokens);
  return signInForm(r, 200, noticeOf(r.url));
}

/** POST /console/sign-in: a session cookie, or the form again saying why not. */
export async function signIn(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  const f = await readForm(r);
  if (f instanceof Response) return f;
  const email = field(f, "email");
  if (!sameSecret(field(f, "csrf"), signInCookie(r))) {
    return signInForm(
      r,
      403,
      { kind: "error", text: "The sign-in form had expired. It is fresh now: sign in again." },
      email,
    );
  }
  let res: Awaited<ReturnType<typeof cx.ports.console.signIn>>;
  try {
    res = await cx.ports.console.signIn({ email, password: field(f, "password"), clientIp: r.ip }, cx.slow);
  } catch (err) {
    return failure(cx, r, err);
  }
  switch (res.outcome) {
    case SignInOutcome.SIGNED_IN:
      return redirect(PATHS.tokens, [
        cookie(r, SESSION_COOKIE, res.sessionToken, res.maxAgeSeconds, "lax"),
        cookie(r, SIGN_IN_COOKIE, "", 0, "strict"),
      ]);
    case SignInOutcome.THROTTLED: {
      const minutes = Math.ceil(res.retryAfterSeconds / 60);
      const text = `Too many failed sign-ins from this address or for this account. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`;
      const limited = signInForm(r, 429, { kind: "error", text }, email);
      limited.headers.set("Retry-After", String(res.retryAfterSeconds));
      return limited;
    }
    default:
      return signInForm(r, 401, { kind: "error", text: "The email or the password is wrong." }, email);
  }
}

/** POST /console/sign-out: the session ended at the daemon, the cookie cleared. */
export function signOut(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return change(cx, r, async (_s, token, _f, csrf) => {
    await cx.ports.console.signOut({ sessionToken: token, csrfToken: csrf }, cx.call);
    return signedOut(r, "signed-out");
  });
}
