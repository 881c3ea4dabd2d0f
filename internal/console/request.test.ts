// The HTTP every console page shares: whether the browser talks TLS, where a change came from,
// the cookies, the sign-in form's CSRF token, the notice after a change, and the form.
import { describe, expect, test } from "bun:test";
import {
  cookie,
  field,
  fromAnotherSite,
  noticeOf,
  pageRequest,
  pathParam,
  readForm,
  SIGN_IN_COOKIE,
  sessionToken,
  signInCsrf,
} from "./request";

const PROXY = "10.0.0.9";
const request = (url: string, headers: Record<string, string> = {}, peerIp = "192.0.2.1", init: RequestInit = {}) =>
  pageRequest(new Request(url, { headers, ...init }), new URL(url), peerIp, [PROXY]);

describe("a console request", () => {
  test("is secure over TLS, or when a trusted proxy says its client talks TLS; an untrusted peer is not believed", () => {
    expect(request("https://mail.test/console").secure).toBe(true);
    expect(request("http://mail.test/console").secure).toBe(false);
    expect(request("http://mail.test/console", { "x-forwarded-proto": "https, http" }, PROXY).secure).toBe(true);
    expect(request("http://mail.test/console", { "x-forwarded-proto": "http" }, PROXY).secure).toBe(false);
    expect(request("http://mail.test/console", { "x-forwarded-proto": "https" }).secure).toBe(false);
  });

  test("comes from the address a trusted proxy names, else from its peer", () => {
    expect(request("http://mail.test/console", { "x-forwarded-for": "198.51.100.7" }, PROXY).ip).toBe("198.51.100.7");
    expect(request("http://mail.test/console", { "x-forwarded-for": "198.51.100.7" }).ip).toBe("192.0.2.1");
  });

  test("a change from another origin is told apart; one without an Origin header is left to its CSRF token", () => {
    const from = (origin: string | undefined, url = "http://mail.test/console/tokens") =>
      fromAnotherSite(request(url, origin === undefined ? { host: "mail.test" } : { host: "mail.test", origin }));
    expect(from("http://mail.test")).toBe(false);
    expect(from(undefined)).toBe(false);
    expect(from("https://evil.test")).toBe(true);
    // Over TLS the page's origin is https: a form from the same host over http is another site.
    expect(from("http://mail.test", "https://mail.test/console/tokens")).toBe(true);
  });
});

test("a console cookie over TLS: __Host-, Secure, the whole host, out of scripts' reach", () => {
  const set = cookie(request("https://mail.test/console"), "mc_session", "abc", 600, "lax");
  expect(set).toBe("__Host-mc_session=abc; Path=/; Max-Age=600; Secure; HttpOnly; SameSite=Lax");
});

test("a console cookie without TLS: its plain name, for the console's paths only; cleared with maxAge 0", () => {
  const cleared = cookie(request("http://mail.test/console"), "mc_signin", "", 0, "strict");
  expect(cleared).toBe("mc_signin=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict");
});

test("the session token is the session cookie's value, by the name of the request's scheme; empty without one", () => {
  expect(sessionToken(request("http://mail.test/console", { cookie: "mc_session=tok; other=1" }))).toBe("tok");
  expect(sessionToken(request("http://mail.test/console"))).toBe("");
  const both = { cookie: "mc_session=plain; __Host-mc_session=host" };
  expect(sessionToken(request("https://mail.test/console", both))).toBe("host");
  // Over TLS a cookie without the prefix (one a cleartext page or a sibling host may have set) is not read.
  expect(sessionToken(request("https://mail.test/console", { cookie: "mc_session=plain" }))).toBe("");
});

test("the sign-in form's CSRF token: the cookie's when it is one of ours, otherwise a new one each time", () => {
  const ours = "A".repeat(43);
  expect(signInCsrf(request("http://mail.test/", { cookie: `${SIGN_IN_COOKIE}=${ours}` }))).toBe(ours);
  const fresh = signInCsrf(request("http://mail.test/", { cookie: `${SIGN_IN_COOKIE}=short` }));
  expect(fresh).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(signInCsrf(request("http://mail.test/"))).not.toBe(fresh);
});

test("the notice after a change is ours: a known ?done=, the revoked token named only when shaped like an id", () => {
  const notice = (query: string) => noticeOf(new URL(`http://mail.test/console/tokens?${query}`));
  expect(notice("done=added")?.text).toStartWith("The domain was added.");
  expect(notice("done=revoked&token=tok_0123456789abcdef")?.text).toStartWith("The token tok_0123456789abcdef was");
  expect(notice("done=revoked&token=<script>")?.text).toStartWith("The token was revoked.");
  expect(notice("done=anything")).toBeUndefined();
  expect(notice("")).toBeUndefined();
});

test("a path parameter is decoded; a malformed escape stays as sent", () => {
  expect(pathParam("example.com")).toBe("example.com");
  expect(pathParam("kim%40example.org")).toBe("kim@example.org");
  expect(pathParam("%E0%A4%A")).toBe("%E0%A4%A");
});

describe("a form", () => {
  const post = (body: string, type?: string) =>
    request("http://mail.test/console/tokens", type ? { "content-type": type } : {}, undefined, {
      method: "POST",
      body,
    });

  test("urlencoded: its text fields; a missing field is empty", async () => {
    const f = await readForm(post("name=ci&csrf=x", "application/x-www-form-urlencoded"));
    expect(f).not.toBeInstanceOf(Response);
    if (f instanceof Response) return;
    expect([field(f, "name"), field(f, "csrf"), field(f, "missing")]).toEqual(["ci", "x", ""]);
  });

  test("anything else is a page saying so: 415 for another type, 400 for a form that cannot be read", async () => {
    expect(((await readForm(post('{"name":"ci"}', "application/json"))) as Response).status).toBe(415);
    expect(((await readForm(post("--x\r\nbroken", "multipart/form-data; boundary=y"))) as Response).status).toBe(400);
  });
});
