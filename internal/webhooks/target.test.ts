// Where a webhook request goes, with a DNS server of the test's own: the name resolved once,
// every address checked, the request pinned to the first.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { dnsResolver, type Resolve } from "../dnsquery/resolver";
import { type DnsServer, startDnsServer } from "../testkit/dns";
import { webhookTarget } from "./target";

let dns: DnsServer;
let resolve: Resolve;
beforeAll(async () => {
  dns = await startDnsServer();
  resolve = dnsResolver({ server: dns.address, timeoutMs: 500, tries: 1 });
  dns.setAddresses("hooks.example.test", "A", [["198.51.99.7", "198.51.99.8"]]);
  dns.setAddresses("v6.example.test", "AAAA", [["2001:4860::7"]]);
  dns.setAddresses("inside.example.test", "A", [["10.0.0.7"]]);
  dns.setAddresses("mixed.example.test", "A", [["198.51.99.7"]]);
  dns.setAddresses("mixed.example.test", "AAAA", [["64:ff9b::7f00:1"]]);
  dns.setAddresses("nodata.example.test", "A", []);
});
afterAll(() => dns?.stop());

describe("webhookTarget", () => {
  test("a name: the request goes to its first address, with the URL's Host and the name for TLS", async () => {
    expect(await webhookTarget("https://hooks.example.test:8443/in?x=1", resolve, false)).toEqual({
      ok: true,
      target: {
        connectUrl: "https://198.51.99.7:8443/in?x=1",
        host: "hooks.example.test:8443",
        serverName: "hooks.example.test",
        address: "198.51.99.7",
      },
    });
  });

  test("a name with only IPv6 addresses: the first of them, in brackets", async () => {
    const found = await webhookTarget("http://v6.example.test/in", resolve, false);
    expect(found).toMatchObject({
      ok: true,
      target: { connectUrl: "http://[2001:4860::7]/in", host: "v6.example.test" },
    });
  });

  test("an address in the URL: no lookup, no server name", async () => {
    const asked = dns.questions();
    expect(await webhookTarget("https://[2606:4700::1]/in", resolve, false)).toEqual({
      ok: true,
      target: {
        connectUrl: "https://[2606:4700::1]/in",
        host: "[2606:4700::1]",
        serverName: undefined,
        address: "2606:4700::1",
      },
    });
    expect(dns.questions()).toBe(asked);
  });

  test.each([
    ["http://127.0.0.1:8080/hook", "refused: 127.0.0.1 is a private address (127.0.0.1)"],
    ["http://[::1]:8080/hook", "refused: ::1 is a private address (::1)"],
    ["http://localhost:3000/hook", "refused: localhost is a private address (127.0.0.1)"],
    ["http://inside.example.test/hook", "refused: inside.example.test is a private address (10.0.0.7)"],
    // Any address of the answer refuses the name: here NAT64 for 127.0.0.1, beside a public one.
    ["http://mixed.example.test/hook", "refused: mixed.example.test is a private address (64:ff9b::7f00:1)"],
    ["http://[64:ff9b::a00:1]/hook", "refused: 64:ff9b::a00:1 is a private address (64:ff9b::a00:1)"],
    ["http://[2002:c0a8:101::1]/hook", "refused: 2002:c0a8:101::1 is a private address (2002:c0a8:101::1)"],
    ["http://[::a00:1]/hook", "refused: ::a00:1 is a private address (::a00:1)"],
    ["http://nowhere.example.test/hook", "nowhere.example.test does not resolve to an address"],
    ["http://nodata.example.test/hook", "nodata.example.test does not resolve to an address"],
  ])("%s: %s", async (url, error) => {
    expect(await webhookTarget(url, resolve, false)).toEqual({ ok: false, error });
  });

  test("loopback and private targets when the operator allows them; localhost is never asked of DNS", async () => {
    const asked = dns.questions();
    expect(await webhookTarget("http://localhost:3000/hook", resolve, true)).toMatchObject({
      ok: true,
      target: { connectUrl: "http://127.0.0.1:3000/hook", host: "localhost:3000", serverName: "localhost" },
    });
    expect(dns.questions()).toBe(asked);
    expect(await webhookTarget("http://inside.example.test/hook", resolve, true)).toMatchObject({
      ok: true,
      target: { address: "10.0.0.7" },
    });
  });

  test("a lookup that fails is an error that says so", async () => {
    const silent = dnsResolver({ server: "127.0.0.1:9", timeoutMs: 100, tries: 1 });
    const found = await webhookTarget("http://hooks.example.test/hook", silent, false);
    expect(found).toEqual({
      ok: false,
      error: expect.stringContaining("the DNS lookup of A hooks.example.test failed"),
    });
  });

  test("a name that answers a public address, then 127.0.0.1: each target is the address its own lookup checked", async () => {
    dns.setAddresses("flip.example.test", "A", [["198.51.99.7"], ["127.0.0.1"]]);
    const first = await webhookTarget("http://flip.example.test/hook", resolve, false);
    expect(first).toMatchObject({ ok: true, target: { connectUrl: "http://198.51.99.7/hook" } });
    const second = await webhookTarget("http://flip.example.test/hook", resolve, false);
    expect(second).toEqual({ ok: false, error: "refused: flip.example.test is a private address (127.0.0.1)" });
    // One A question per target: nothing looks the name up again.
    expect(dns.questions("flip.example.test", "A")).toBe(2);
  });
});
