import { Code, ConnectError } from "@connectrpc/connect";
import type { GetSessionResponse } from "../gen/mailcore/limiter/v1/console_pb";
import { sameSecret } from "../token/token";
import type { ConsoleContext } from "./context";
import { messagePage, PATHS } from "./pages";
import {
  cookie,
  type Form,
  field,
  type PageRequest,
  page,
  readForm,
  redirect,
  SESSION_COOKIE,
  sessionToken,
} from "./request";

// What stands before every page of a signed-in user: the session (the daemon's), the form and
// its CSRF token for a change, and the daemon's refusals as pages.

/** To the sign-in page with a notice, the session cookie cleared. */
export function signedOut(r: PageRequest, done: string): Response {
  return redirect(`${PATHS.signIn}?done=${done}`, [cookie(r, SESSION_COOKIE, "", 0, "lax")]);
}

/** The daemon's refusals as pages; anything else is a failure of the daemon (503, nothing changed). */
export function failure(cx: ConsoleContext, r: PageRequest, err: unknown, session?: GetSessionResponse): Response {
  if (err instanceof ConnectError) {
    switch (err.code) {
      case Code.Unauthenticated:
        return signedOut(r, "expired");
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
  cx.log.warn("console: daemon call failed", { path: r.url.pathname, error: (err as Error).message });
  return page(
    503,
    messagePage(
      "Unavailable",
      "The service cannot be reached right now; nothing was changed. Try again in a moment.",
      session,
    ),
    { "Retry-After": "1" },
  );
}

/** Runs a page that needs a session: the session first, then the page (with its failures as pages). */
export async function signedIn(
  cx: ConsoleContext,
  r: PageRequest,
  run: (s: GetSessionResponse, token: string) => Promise<Response>,
): Promise<Response> {
  const token = sessionToken(r);
  let s: GetSessionResponse;
  try {
    s = await cx.ports.console.getSession({ sessionToken: token }, cx.call);
  } catch (err) {
    return failure(cx, r, err);
  }
  try {
    return await run(s, token);
  } catch (err) {
    return failure(cx, r, err, s);
  }
}

/** A change: a form with the session's CSRF token (the daemon checks it). */
export function change(
  cx: ConsoleContext,
  r: PageRequest,
  run: (s: GetSessionResponse, token: string, f: Form, csrf: string) => Promise<Response>,
): Promise<Response> {
  return signedIn(cx, r, async (s, token) => {
    const f = await readForm(r);
    if (f instanceof Response) return f;
    return run(s, token, f, field(f, "csrf"));
  });
}

/** A change the console makes through the API's RPCs: its CSRF token is checked here, against the session's. */
export function ownChange(
  cx: ConsoleContext,
  r: PageRequest,
  run: (s: GetSessionResponse) => Promise<Response>,
): Promise<Response> {
  return change(cx, r, async (s, _token, _f, csrf) => {
    if (!sameSecret(csrf, s.csrfToken)) throw new ConnectError("bad CSRF token", Code.PermissionDenied);
    return run(s);
  });
}

/** A page that reads the records: a filter or cursor the daemon refuses is a page saying why (422). */
export function reading(
  cx: ConsoleContext,
  r: PageRequest,
  run: (s: GetSessionResponse) => Promise<string>,
): Promise<Response> {
  return signedIn(cx, r, async (s) => {
    try {
      return page(200, await run(s));
    } catch (err) {
      if (!(err instanceof ConnectError) || err.code !== Code.InvalidArgument) throw err;
      const q = r.url.searchParams;
      if (!q.has("cursor") || !/cursor/.test(err.rawMessage))
        return page(422, messagePage("Not shown", `${err.rawMessage}.`, s));
      // Only a link that was changed or cut short carries such a cursor: the list itself is there.
      const first = new URLSearchParams([...q].filter(([name]) => name !== "cursor"));
      const text = `This link asks for a page the list never gave (${err.rawMessage}): it was changed or cut short. The list starts on its first page.`;
      return page(
        422,
        messagePage("No such page", text, s, {
          href: first.size ? `${r.url.pathname}?${first}` : r.url.pathname,
          label: "First page",
        }),
      );
    }
  });
}
