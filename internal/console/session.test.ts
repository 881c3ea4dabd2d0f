// What stands before every page of a signed-in user, with a daemon in this process: the
// session, the form's CSRF token, and the daemon's refusals as pages.
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, test } from "bun:test";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { AutomationService } from "../gen/mailcore/limiter/v1/automation_pb";
import { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { WebhookService } from "../gen/mailcore/limiter/v1/webhooks_pb";
import { logger } from "../log/log";
import { type ConsolePorts, consoleContext } from "./context";
import { pageRequest } from "./request";
import { failure, ownChange, reading, signedIn } from "./session";

const SESSION = "session-token";
const CSRF = "csrf-token";
/** A client of a daemon that serves nothing of this service. */
const unserved = <S extends DescService>(service: S) =>
  createClient(
    service,
    createRouterTransport(() => {}),
  );
/** A daemon that knows one session. */
const ports: ConsolePorts = {
  console: createClient(
    ConsoleService,
    createRouterTransport(({ service }) =>
      service(ConsoleService, {
        getSession: ({ sessionToken }) => {
          if (sessionToken !== SESSION) throw new ConnectError("no such session", Code.Unauthenticated);
          return { email: "ann@acme.test", orgSlug: "acme", orgId: "org_1", plan: Plan.FREE, csrfToken: CSRF };
        },
      }),
    ),
  ),
  audience: unserved(AudienceService),
  automation: unserved(AutomationService),
  mail: unserved(MailService),
  webhooks: unserved(WebhookService),
  suppressions: unserved(SuppressionService),
};
const cx = consoleContext(ports, { timeoutMs: 1_000, trustProxy: [], log: logger("test") });
const request = (path: string, o: { session?: boolean; form?: string } = {}) => {
  const url = `http://mail.test${path}`;
  const headers: Record<string, string> = o.session === false ? {} : { cookie: `mc_session=${SESSION}` };
  const init = o.form === undefined ? {} : { method: "POST", body: o.form };
  if (o.form !== undefined) headers["content-type"] = "application/x-www-form-urlencoded";
  return pageRequest(new Request(url, { headers, ...init }), new URL(url), "192.0.2.1", []);
};
const ok = async () => new Response("the page");

describe("the daemon's refusals as pages", () => {
  const status = (code: Code) => failure(cx, request("/console/tokens"), new ConnectError("refused", code)).status;

  test("no session any more: to the sign-in page, the session cookie cleared", () => {
    const res = failure(cx, request("/console/tokens"), new ConnectError("expired", Code.Unauthenticated));
    expect(res.status).toBe(303);
    expect(res.headers.get("Location")).toBe("/console/sign-in?done=expired");
    expect(res.headers.get("Set-Cookie")).toContain("mc_session=;");
  });

  test("a CSRF token refused 403, nothing found 404, a value refused 400", () => {
    expect([Code.PermissionDenied, Code.NotFound, Code.InvalidArgument, Code.AlreadyExists].map(status)).toEqual([
      403, 404, 400, 400,
    ]);
  });

  test("anything else: 503, nothing changed, try again in a second", async () => {
    for (const err of [new ConnectError("down", Code.Unavailable), new Error("socket hang up")]) {
      const res = failure(cx, request("/console/tokens"), err);
      expect(res.status).toBe(503);
      expect(res.headers.get("Retry-After")).toBe("1");
      expect(await res.text()).toContain("nothing was changed");
    }
  });
});

describe("a page of a signed-in user", () => {
  test("is served with the daemon's session", async () => {
    const res = await signedIn(cx, request("/console/tokens"), async (s) => new Response(s.orgSlug));
    expect(await res.text()).toBe("acme");
  });

  test("without a session it is the sign-in page; the page is not run", async () => {
    let ran = false;
    const res = await signedIn(cx, request("/console/tokens", { session: false }), async () => {
      ran = true;
      return ok();
    });
    expect([res.status, res.headers.get("Location"), ran]).toEqual([303, "/console/sign-in?done=expired", false]);
  });

  test("what the page throws is a page too, inside the session's layout", async () => {
    const res = await signedIn(cx, request("/console/tokens"), async () => {
      throw new ConnectError("no token tok_1", Code.NotFound);
    });
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("ann@acme.test");
  });
});

describe("a change the console checks itself", () => {
  test("runs with the session's CSRF token", async () => {
    const res = await ownChange(cx, request("/console/webhooks/wh_1/test", { form: `csrf=${CSRF}` }), ok);
    expect(await res.text()).toBe("the page");
  });

  test("is refused (403) with another token, or none", async () => {
    for (const form of ["csrf=another", ""])
      expect((await ownChange(cx, request("/console/webhooks/wh_1/test", { form }), ok)).status).toBe(403);
  });
});

describe("a page that reads the records", () => {
  const refusedWith = (path: string, message: string) =>
    reading(cx, request(path), async () => {
      throw new ConnectError(message, Code.InvalidArgument);
    });

  test("a cursor the list never gave: 422, with a link to the list's first page under the same filters", async () => {
    const res = await refusedWith("/console/subscribers?tag=vip&cursor=bogus", "invalid cursor");
    expect(res.status).toBe(422);
    const body = await res.text();
    expect(body).toContain("No such page");
    expect(body).toContain('href="/console/subscribers?tag=vip"');
  });

  test("any other refusal: 422 saying why", async () => {
    const res = await refusedWith("/console/subscribers?tag=vip", "tag: too long");
    expect(res.status).toBe(422);
    expect(await res.text()).toContain("tag: too long.");
  });
});
