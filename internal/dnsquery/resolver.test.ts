import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Dnsmasq, type DnsRecord, startDnsmasq } from "../testkit/dnsmasq";
import { freePort } from "../testkit/testkit";
import { dnsName, dnsResolver, type Resolve } from "./resolver";
import { parseServer } from "./transport";

// A 2048-bit key's p= is 392 characters: published as two strings, as DNS hosting panels do.
const KEY = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA".padEnd(392, "x");
const DKIM = `v=DKIM1; k=rsa; p=${KEY}`;
const BIG = Array.from({ length: 12 }, (_, i) => `record ${i} `.padEnd(200, "z"));

const TABLE: DnsRecord[] = [
  { type: "TXT", name: "sel._domainkey.example.test", strings: [DKIM.slice(0, 255), DKIM.slice(255)] },
  { type: "TXT", name: "two.example.test", strings: ["v=spf1 ", "include:spf.platform.test ", "-all"] },
  { type: "TXT", name: "two.example.test", strings: ['a "quoted", \\ one'] },
  ...BIG.map((s): DnsRecord => ({ type: "TXT", name: "big.example.test", strings: [s] })),
  { type: "MX", name: "example.test", preference: 10, exchange: "mx1.example.test" },
  { type: "MX", name: "example.test", preference: 20, exchange: "mx2.example.test" },
  { type: "MX", name: "null.example.test", preference: 0, exchange: "." },
  { type: "A", name: "mx1.example.test", address: "127.0.0.2" },
  { type: "A", name: "mx1.example.test", address: "127.0.0.3" },
  { type: "AAAA", name: "mx1.example.test", address: "::1" },
  { type: "CNAME", name: "alias.example.test", target: "mx1.example.test" },
  { type: "CNAME", name: "txt-alias.example.test", target: "two.example.test" },
  { type: "CNAME", name: "dangling.example.test", target: "nowhere.example.test" },
  { type: "timeout", name: "slow.example.test" },
  { type: "servfail", name: "broken.example.test" },
];

describe("dnsResolver against dnsmasq", () => {
  let dns: Dnsmasq;
  let resolve: Resolve;
  beforeAll(async () => {
    dns = await startDnsmasq(TABLE);
    resolve = dnsResolver({ server: dns.address, timeoutMs: 300, tries: 2 });
  });
  afterAll(async () => {
    await dns?.stop();
  });

  test("a TXT record split into strings is one record, its strings kept and joined", async () => {
    expect(await resolve("TXT", "sel._domainkey.example.test")).toEqual({
      kind: "found",
      records: [{ strings: [DKIM.slice(0, 255), DKIM.slice(255)], text: DKIM }],
    });
  });

  test("two TXT records at a name stay two; quotes and backslashes arrive as published", async () => {
    const r = await resolve("TXT", "Two.Example.Test.");
    if (r.kind !== "found") throw new Error(r.detail);
    expect(r.records.map((t) => t.text).sort()).toEqual([
      'a "quoted", \\ one',
      "v=spf1 include:spf.platform.test -all",
    ]);
    expect(r.records.find((t) => t.strings.length === 3)?.strings).toEqual([
      "v=spf1 ",
      "include:spf.platform.test ",
      "-all",
    ]);
  });

  test("an answer too large for UDP comes over TCP, whole", async () => {
    const r = await resolve("TXT", "big.example.test");
    if (r.kind !== "found") throw new Error(r.detail);
    expect(r.records.map((t) => t.text).sort()).toEqual([...BIG].sort());
  });

  test("MX with preferences, and a null MX as exchange '.'", async () => {
    const r = await resolve("MX", "example.test");
    if (r.kind !== "found") throw new Error(r.detail);
    expect(r.records.sort((a, b) => a.preference - b.preference)).toEqual([
      { preference: 10, exchange: "mx1.example.test" },
      { preference: 20, exchange: "mx2.example.test" },
    ]);
    expect(await resolve("MX", "null.example.test")).toEqual({
      kind: "found",
      records: [{ preference: 0, exchange: "." }],
    });
  });

  test("A and AAAA", async () => {
    const a = await resolve("A", "mx1.example.test");
    expect(a.kind === "found" && a.records.sort()).toEqual(["127.0.0.2", "127.0.0.3"]);
    expect(await resolve("AAAA", "mx1.example.test")).toEqual({ kind: "found", records: ["::1"] });
  });

  test("CNAMEs: read as such, followed for other types, a dangling one ends in NXDOMAIN", async () => {
    expect(await resolve("CNAME", "alias.example.test")).toEqual({ kind: "found", records: ["mx1.example.test"] });
    const a = await resolve("A", "alias.example.test");
    expect(a.kind === "found" && a.records.sort()).toEqual(["127.0.0.2", "127.0.0.3"]);
    const txt = await resolve("TXT", "txt-alias.example.test");
    expect(txt.kind === "found" && txt.records).toHaveLength(2);
    expect(await resolve("A", "dangling.example.test")).toEqual({
      kind: "none",
      nxdomain: true,
      detail: "nowhere.example.test does not exist (NXDOMAIN)",
    });
  });

  test("no such name and no such record are told apart", async () => {
    expect(await resolve("TXT", "_dmarc.nowhere.test")).toEqual({
      kind: "none",
      nxdomain: true,
      detail: "_dmarc.nowhere.test does not exist (NXDOMAIN)",
    });
    expect(await resolve("MX", "mx1.example.test")).toEqual({
      kind: "none",
      nxdomain: false,
      detail: "mx1.example.test has no MX record",
    });
  });

  test("a name whose server never answers is a temporary failure after the tries, not a missing record", async () => {
    const t0 = performance.now();
    const r = await resolve("TXT", "_dmarc.slow.example.test");
    const ms = performance.now() - t0;
    expect(r.kind).toBe("temporary");
    expect(r.kind === "temporary" && r.detail).toMatch(
      /^the DNS lookup of TXT _dmarc\.slow\.example\.test failed: no answer from 127\.0\.0\.1:\d+ within 300 ms$/,
    );
    expect(ms).toBeGreaterThanOrEqual(2 * 300 - 5);
    // The other names answer meanwhile.
    expect((await resolve("MX", "example.test")).kind).toBe("found");
  });

  test("SERVFAIL is a temporary failure", async () => {
    const r = await resolve("MX", "broken.example.test");
    expect(r).toEqual({
      kind: "temporary",
      detail: `the DNS lookup of MX broken.example.test failed: SERVFAIL from ${dns.address}`,
    });
  });

  test("a name that is not a DNS name is an error, not a lookup", async () => {
    await expect(resolve("TXT", "a..example.test")).rejects.toThrow('"a..example.test" is not a DNS name');
    await expect(resolve("TXT", "sp ace.test")).rejects.toThrow("is not a DNS name");
  });
});

test("a server with nothing on its port is a temporary failure", async () => {
  const resolve = dnsResolver({ server: `127.0.0.1:${await freePort()}`, timeoutMs: 300, tries: 1 });
  const r = await resolve("A", "example.test");
  expect(r.kind).toBe("temporary");
});

test("dnsName: ASCII, lower case, punycode, and what is not a name", () => {
  expect(dnsName("_DMARC.Example.COM.")).toBe("_dmarc.example.com");
  expect(dnsName("bücher.example")).toBe("xn--bcher-kva.example");
  expect(dnsName("a..b")).toBeUndefined();
  expect(dnsName("")).toBeUndefined();
  expect(dnsName(`${"a".repeat(64)}.test`)).toBeUndefined();
  expect(dnsName(`${"a.".repeat(127)}test`)).toBeUndefined();
  expect(dnsName("[127.0.0.1]")).toBeUndefined();
});

test("parseServer: DNS_SERVER's forms", () => {
  expect(parseServer("192.0.2.53")).toEqual({ host: "192.0.2.53", port: 53 });
  expect(parseServer("127.0.0.1:5353")).toEqual({ host: "127.0.0.1", port: 5353 });
  expect(parseServer("[2001:db8::53]:54")).toEqual({ host: "2001:db8::53", port: 54 });
  expect(parseServer("2001:db8::53")).toEqual({ host: "2001:db8::53", port: 53 });
  expect(() => parseServer("dns.example:53")).toThrow("is not a DNS server address");
  expect(() => parseServer("127.0.0.1:70000")).toThrow("is not a DNS server address");
});
