import { Code, ConnectError } from "@connectrpc/connect";
import type { GetSessionResponse } from "../gen/mailcore/limiter/v1/console_pb";
import type { ConsoleContext } from "./context";
import { messagePage, PATHS, revokeTokenPage, tokensPage } from "./pages";
import { field, noticeOf, type PageRequest, page, pathParam, redirect } from "./request";
import { change, signedIn } from "./session";

// The organization's API tokens: listed, made (shown once), revoked after a confirmation.

/** The tokens page with the organization's active tokens. */
async function tokensView(
  cx: ConsoleContext,
  s: GetSessionResponse,
  token: string,
  status: number,
  extra: Partial<Parameters<typeof tokensPage>[0]> = {},
): Promise<Response> {
  const { tokens } = await cx.ports.console.listApiTokens({ sessionToken: token }, cx.call);
  return page(status, tokensPage({ session: s, tokens, ...extra }));
}

/** GET /console/tokens. */
export function showTokens(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return signedIn(cx, r, (s, token) => tokensView(cx, s, token, 200, { notice: noticeOf(r.url) }));
}

/** POST /console/tokens: a new token, shown this once; a name the daemon refuses is the form again (422). */
export function createToken(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return change(cx, r, async (s, token, f, csrf) => {
    const name = field(f, "name");
    try {
      const made = await cx.ports.console.createApiToken({ sessionToken: token, csrfToken: csrf, name }, cx.call);
      return await tokensView(cx, s, token, 201, { created: { token: made.token, name: made.info!.name } });
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.InvalidArgument)
        return tokensView(cx, s, token, 422, { notice: { kind: "error", text: err.rawMessage }, name });
      throw err;
    }
  });
}

/** GET /console/tokens/{id}/revoke: asks first, naming the token. */
export function confirmRevoke(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return signedIn(cx, r, async (s, token) => {
    const tokenId = pathParam(id!);
    const { tokens } = await cx.ports.console.listApiTokens({ sessionToken: token }, cx.call);
    const found = tokens.find((t) => t.id === tokenId);
    if (!found) return page(404, messagePage("Not found", `There is no active token ${tokenId}.`, s));
    return page(200, revokeTokenPage({ session: s, token: found }));
  });
}

/** POST /console/tokens/{id}/revoke. */
export function revokeToken(cx: ConsoleContext, r: PageRequest, [id]: string[]): Promise<Response> {
  return change(cx, r, async (_s, token, _f, csrf) => {
    const tokenId = pathParam(id!);
    await cx.ports.console.revokeApiToken({ sessionToken: token, csrfToken: csrf, tokenId }, cx.call);
    return redirect(`${PATHS.tokens}?${new URLSearchParams({ done: "revoked", token: tokenId })}`);
  });
}
