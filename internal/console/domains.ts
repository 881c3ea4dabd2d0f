import { Code, ConnectError } from "@connectrpc/connect";
import type { GetSessionResponse } from "../gen/mailcore/limiter/v1/console_pb";
import type { ConsoleContext } from "./context";
import { domainsPage, PATHS } from "./pages";
import { field, noticeOf, type PageRequest, page, pathParam, redirect } from "./request";
import { change, signedIn } from "./session";

// The organization's sending domains: added, then verified by their TXT record (the daemon asks DNS).

/** The domains page with the organization's domains. */
async function domainsView(
  cx: ConsoleContext,
  s: GetSessionResponse,
  token: string,
  status: number,
  extra: Partial<Parameters<typeof domainsPage>[0]> = {},
): Promise<Response> {
  const { domains } = await cx.ports.console.listDomains({ sessionToken: token }, cx.call);
  return page(status, domainsPage({ session: s, domains, ...extra }));
}

/** GET /console/domains. */
export function showDomains(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return signedIn(cx, r, (s, token) => domainsView(cx, s, token, 200, { notice: noticeOf(r.url) }));
}

/** POST /console/domains: a domain the daemon refuses (422) or has (409) is the form again, saying why. */
export function addDomain(cx: ConsoleContext, r: PageRequest): Promise<Response> {
  return change(cx, r, async (s, token, f, csrf) => {
    const domain = field(f, "domain");
    try {
      await cx.ports.console.addSendingDomain({ sessionToken: token, csrfToken: csrf, domain }, cx.call);
      return redirect(`${PATHS.domains}?done=added`);
    } catch (err) {
      if (err instanceof ConnectError && (err.code === Code.InvalidArgument || err.code === Code.AlreadyExists)) {
        return domainsView(cx, s, token, err.code === Code.InvalidArgument ? 422 : 409, {
          notice: { kind: "error", text: err.rawMessage },
          domain,
        });
      }
      throw err;
    }
  });
}

/** POST /console/domains/{name}/verify: verified, or the page saying what DNS answered (422) or that another organization has it (409). */
export function verifyDomain(cx: ConsoleContext, r: PageRequest, [name]: string[]): Promise<Response> {
  return change(cx, r, async (s, token, _f, csrf) => {
    let res: Awaited<ReturnType<typeof cx.ports.console.verifyDomain>>;
    try {
      res = await cx.ports.console.verifyDomain(
        { sessionToken: token, csrfToken: csrf, domain: pathParam(name!) },
        cx.slow,
      );
    } catch (err) {
      // Another organization verified it first.
      if (err instanceof ConnectError && err.code === Code.AlreadyExists)
        return domainsView(cx, s, token, 409, { notice: { kind: "error", text: err.rawMessage } });
      throw err;
    }
    if (res.domain?.verified) return redirect(`${PATHS.domains}?done=verified`);
    return domainsView(cx, s, token, 422, { failed: { name: res.domain!.name, detail: res.detail } });
  });
}
