import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { dnsResolver, type Resolve } from "../dnsquery/resolver";
import { type CertPem, issueCert, newCa } from "../plane/certs";
import { type Dnsmasq, type DnsRecord, startDnsmasq } from "../testkit/dnsmasq";
import {
  httpsPolicyFetch,
  type MtaStsPolicy,
  MtaStsCache,
  mxPatternMatches,
  parseStsPolicy,
  parseStsRecord,
  policyAllows,
} from "./mtasts";

test("the TXT record: v=STSv1 first, an id of 1 to 32 letters and digits", () => {
  expect(parseStsRecord("v=STSv1; id=20160831085700Z;")).toEqual({ ok: true, id: "20160831085700Z" });
  expect(parseStsRecord("v=STSv1;id=abc ; ext_1=x")).toEqual({ ok: true, id: "abc" });
  expect(parseStsRecord("id=abc; v=STSv1")).toEqual({ ok: false, reason: "the record does not start with v=STSv1" });
  expect(parseStsRecord("v=STSv1")).toEqual({ ok: false, reason: "the record has no id" });
  expect(parseStsRecord("v=STSv1; id=a-b")).toEqual({ ok: false, reason: "id=a-b is not 1 to 32 letters and digits" });
  expect(parseStsRecord(`v=STSv1; id=${"a".repeat(33)}`).ok).toBe(false);
  expect(parseStsRecord("v=STSv1; id")).toEqual({
    ok: false,
    reason: '"v=STSv1; id" is not a list of key=value fields',
  });
});

test("the policy file: its fields, CRLF or LF, and what makes it unusable", () => {
  const text = "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.Example.net\r\nmax_age: 604800\r\n";
  expect(parseStsPolicy(text)).toEqual({
    ok: true,
    policy: { mode: "enforce", mx: ["mail.example.com", "*.example.net"], maxAge: 604800 },
  });
  expect(parseStsPolicy("version: STSv1\nmode: none\nmax_age: 0\nfuture_key: 1\n")).toEqual({
    ok: true,
    policy: { mode: "none", mx: [], maxAge: 0 },
  });
  const bad = (t: string) => {
    const r = parseStsPolicy(t);
    return r.ok ? "ok" : r.reason;
  };
  expect(bad("mode: enforce\nmx: a.example\nmax_age: 1")).toBe("the policy's version is not STSv1");
  expect(bad("version: STSv1\nmode: strict\nmx: a.example\nmax_age: 1")).toBe(
    'mode "strict" is not enforce, testing or none',
  );
  expect(bad("version: STSv1\nmode: testing\nmax_age: 86400")).toBe("a policy in testing mode lists no mx");
  expect(bad("version: STSv1\nmode: enforce\nmx: a.example\nmax_age: 31557601")).toBe(
    'max_age "31557601" is not a number of seconds up to 31557600',
  );
  expect(bad("version: STSv1\nmode: enforce\nmx: a.example")).toBe(
    'max_age "" is not a number of seconds up to 31557600',
  );
  expect(bad("version: STSv1\nmode: enforce\nmx: *.*.example\nmax_age: 1")).toBe(
    'mx "*.*.example" is not a host name or *.domain',
  );
  expect(bad("<html>not found</html>")).toBe('"<html>not found</html>" is not a key: value line');
});

test("policyAllows: a wildcard covers one label; testing and none allow every host", () => {
  const enforce: MtaStsPolicy = { mode: "enforce", mx: ["mail.example.com", "*.example.net"], maxAge: 1 };
  expect(policyAllows(enforce, "mail.example.com")).toBe(true);
  expect(policyAllows(enforce, "MAIL.Example.COM.")).toBe(true);
  expect(policyAllows(enforce, "mx1.example.net")).toBe(true);
  expect(policyAllows(enforce, "a.mx1.example.net")).toBe(false);
  expect(policyAllows(enforce, "example.net")).toBe(false);
  expect(policyAllows(enforce, "other.example.com")).toBe(false);
  expect(policyAllows({ ...enforce, mode: "testing" }, "other.example.com")).toBe(true);
  expect(policyAllows({ ...enforce, mode: "none" }, "other.example.com")).toBe(true);
  expect(mxPatternMatches("*.example.net", "x.example.net")).toBe(true);
});

const SERVER_IP = "127.0.0.41";
const POLICY = (mx: string, maxAge = 86400) => `version: STSv1\nmode: enforce\nmx: ${mx}\nmax_age: ${maxAge}\n`;

describe("MTA-STS over dnsmasq and an HTTPS server of the test's own", () => {
  let dns: Dnsmasq;
  let resolve: Resolve;
  let ca: CertPem;
  let server: ReturnType<typeof Bun.serve>;
  const served = new Map<string, () => Response>();
  let requests: string[] = [];
  let clock = 1_000_000;
  const table = (ids: Record<string, string>): DnsRecord[] => [
    ...Object.entries(ids).map(
      ([domain, id]): DnsRecord => ({ type: "TXT", name: `_mta-sts.${domain}`, strings: [`v=STSv1; id=${id};`] }),
    ),
    ...["good", "redirect", "html", "big", "badcert", "down"].map(
      (d): DnsRecord => ({ type: "A", name: `mta-sts.${d}.test`, address: SERVER_IP }),
    ),
    { type: "A", name: "mta-sts.private.test", address: SERVER_IP },
    { type: "TXT", name: "_mta-sts.private.test", strings: ["v=STSv1; id=1"] },
    { type: "TXT", name: "_mta-sts.two.test", strings: ["v=STSv1; id=1"] },
    { type: "TXT", name: "_mta-sts.two.test", strings: ["v=STSv1; id=2"] },
    { type: "TXT", name: "_mta-sts.other.test", strings: ["something else"] },
    { type: "timeout", name: "_mta-sts.slow.test" },
  ];
  const IDS = {
    "good.test": "1",
    "redirect.test": "1",
    "html.test": "1",
    "big.test": "1",
    "badcert.test": "1",
    "down.test": "1",
  };

  beforeAll(async () => {
    ca = await newCa("mta-sts test CA");
    // One certificate for every name but mta-sts.badcert.test, which the same server also answers for.
    const hosts = ["good", "redirect", "html", "big", "down", "private"].map((d) => `mta-sts.${d}.test`);
    const leaf = await issueCert(ca, { name: "mta-sts.good.test", hosts });
    server = Bun.serve({
      hostname: SERVER_IP,
      port: 0,
      tls: { cert: leaf.cert, key: leaf.key },
      fetch(req) {
        const host = (req.headers.get("host") ?? "").replace(/:\d+$/, "");
        requests.push(`${host}${new URL(req.url).pathname}`);
        return served.get(host)?.() ?? new Response("no such policy", { status: 404 });
      },
    });
    dns = await startDnsmasq(table(IDS));
    resolve = dnsResolver({ server: dns.address, timeoutMs: 250, tries: 1 });
  });
  afterAll(async () => {
    server?.stop(true);
    await dns?.stop();
  });

  const text =
    (body: string, type = "text/plain; charset=utf-8") =>
    () =>
      new Response(body, { headers: { "content-type": type } });
  const fetcher = (extra: Partial<Parameters<typeof httpsPolicyFetch>[0]> = {}) =>
    httpsPolicyFetch({ resolve, ca: ca.cert, port: server.port, allowPrivate: true, timeoutMs: 2_000, ...extra });
  const cache = (extra: Partial<ConstructorParameters<typeof MtaStsCache>[0]> = {}) =>
    new MtaStsCache({ resolve, fetch: fetcher(), nowMs: () => clock, recheckMs: 60_000, retryMs: 5_000, ...extra });

  test("the fetch: the policy over verified HTTPS from mta-sts.<domain>", async () => {
    served.set("mta-sts.good.test", text(POLICY("mx.good.test")));
    requests = [];
    expect(await fetcher()("good.test")).toEqual({ ok: true, body: POLICY("mx.good.test") });
    expect(requests).toEqual(["mta-sts.good.test/.well-known/mta-sts.txt"]);
  });

  test("the fetch refuses what RFC 8461 refuses", async () => {
    served.set("mta-sts.redirect.test", () =>
      Response.redirect("https://mta-sts.good.test/.well-known/mta-sts.txt", 301),
    );
    served.set("mta-sts.html.test", text(POLICY("mx.html.test"), "text/html"));
    served.set("mta-sts.big.test", text(`${POLICY("mx.big.test")}${"x: y\n".repeat(20_000)}`));
    served.set("mta-sts.badcert.test", text(POLICY("mx.badcert.test")));
    const f = fetcher();
    expect(await f("redirect.test")).toEqual({
      ok: false,
      reason: "mta-sts.redirect.test answered HTTP 301 (a policy is a 200, redirects are not followed)",
    });
    expect(await f("html.test")).toEqual({
      ok: false,
      reason: "mta-sts.html.test served the policy as text/html, not text/plain",
    });
    expect(await f("big.test")).toEqual({ ok: false, reason: "mta-sts.big.test's policy is over 65536 bytes" });
    const badcert = await f("badcert.test");
    expect(badcert.ok === false && badcert.reason).toContain("ERR_TLS_CERT_ALTNAME_INVALID");
    // A certificate from a CA we do not trust.
    const otherCa = await newCa("another CA");
    const untrusted = await fetcher({ ca: otherCa.cert })("good.test");
    expect(untrusted.ok).toBe(false);
    // A private address, unless allowed.
    served.set("mta-sts.private.test", text(POLICY("mx.private.test")));
    expect(await fetcher({ allowPrivate: false })("private.test")).toEqual({
      ok: false,
      reason: `mta-sts.private.test is on a private address (${SERVER_IP})`,
    });
    expect((await fetcher()("nowhere.test")).ok).toBe(false);
  });

  test("cached by id and max_age: fetched once, again only when the id changes", async () => {
    served.set("mta-sts.good.test", text(POLICY("mx.good.test")));
    requests = [];
    const c = cache();
    expect(await c.lookup("good.test")).toEqual({
      policy: { mode: "enforce", mx: ["mx.good.test"], maxAge: 86400 },
      source: "fetched",
    });
    // Within the recheck interval: no DNS, no fetch. Past it, the same id: DNS, no fetch.
    clock += 30_000;
    expect((await c.lookup("good.test")).source).toBe("fetched");
    clock += 60_000;
    expect(await c.lookup("GOOD.test.")).toMatchObject({ source: "cached", policy: { mx: ["mx.good.test"] } });
    expect(requests).toHaveLength(1);
    // A new id: fetched again, the new policy applies.
    served.set("mta-sts.good.test", text(POLICY("mx2.good.test")));
    await dns.setRecords(table({ ...IDS, "good.test": "2" }));
    clock += 61_000;
    expect(await c.lookup("good.test")).toMatchObject({ source: "fetched", policy: { mx: ["mx2.good.test"] } });
    expect(requests).toHaveLength(2);
    await dns.setRecords(table(IDS));
  });

  test("a failed fetch or a failed TXT lookup keeps the cached policy until it expires; with none cached, no policy", async () => {
    served.set("mta-sts.down.test", text(POLICY("mx.down.test", 3600)));
    const c = cache();
    expect((await c.lookup("down.test")).source).toBe("fetched");
    // The id changes but the server fails: the cached policy still applies.
    served.set("mta-sts.down.test", () => new Response("oops", { status: 500 }));
    await dns.setRecords(table({ ...IDS, "down.test": "2" }));
    clock += 61_000;
    expect(await c.lookup("down.test")).toEqual({
      policy: { mode: "enforce", mx: ["mx.down.test"], maxAge: 3600 },
      source: "cached",
      detail:
        "the policy of down.test could not be fetched: mta-sts.down.test answered HTTP 500 (a policy is a 200, redirects are not followed); the cached policy applies",
    });
    // The TXT record gone: still the cached policy (an attacker who hides it gains nothing).
    await dns.setRecords(table({ ...IDS, "down.test": "2" }).filter((r) => r.name !== "_mta-sts.down.test"));
    clock += 61_000;
    expect(await c.lookup("down.test")).toMatchObject({
      source: "cached",
      detail: "no MTA-STS record at _mta-sts.down.test; the cached policy applies",
    });
    // Past max_age, nothing cached any more: no policy.
    clock += 3_600_000;
    expect(await c.lookup("down.test")).toEqual({
      policy: undefined,
      source: "none",
      detail: "no MTA-STS record at _mta-sts.down.test",
    });
    await dns.setRecords(table(IDS));
    // Never fetched: a failed fetch is no policy.
    const fresh = cache();
    served.set("mta-sts.html.test", text(POLICY("mx.html.test"), "text/html"));
    expect(await fresh.lookup("html.test")).toMatchObject({ policy: undefined, source: "none" });
  });

  test("a timeout on the TXT record, two records, or none of ours: no policy without a cached one", async () => {
    const c = cache();
    const slow = await c.lookup("slow.test");
    expect(slow.policy).toBeUndefined();
    expect(slow.detail).toMatch(/^the DNS lookup of TXT _mta-sts\.slow\.test failed: no answer/);
    expect(await c.lookup("two.test")).toEqual({
      policy: undefined,
      source: "none",
      detail: "2 MTA-STS records at _mta-sts.two.test",
    });
    expect(await c.lookup("other.test")).toEqual({
      policy: undefined,
      source: "none",
      detail: "no MTA-STS records at _mta-sts.other.test",
    });
    expect((await c.lookup("nowhere.test")).source).toBe("none");
  });

  test("concurrent lookups of one domain share one fetch", async () => {
    served.set("mta-sts.good.test", text(POLICY("mx.good.test")));
    requests = [];
    const c = cache();
    const all = await Promise.all([1, 2, 3, 4].map(() => c.lookup("good.test")));
    expect(all.every((r) => r.policy?.mx[0] === "mx.good.test")).toBe(true);
    expect(requests).toHaveLength(1);
  });
});
