import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { dnsResolver, type Resolve } from "../dnsquery/resolver";
import { type Dnsmasq, type DnsRecord, startDnsmasq } from "../testkit/dnsmasq";
import { cachedRouteLookup, mxRoute, orderByPreference, RouteError, type RouteHost, routeLookup } from "./route";

const PUBLIC_A = "93.184.215.14";
const PUBLIC_B = "93.184.215.15";

const TABLE: DnsRecord[] = [
  // Preferences 10, 10, 10 and 20.
  { type: "MX", name: "pref.test", preference: 20, exchange: "backup.pref.test" },
  { type: "MX", name: "pref.test", preference: 10, exchange: "a.pref.test" },
  { type: "MX", name: "pref.test", preference: 10, exchange: "b.pref.test" },
  { type: "MX", name: "pref.test", preference: 10, exchange: "c.pref.test" },
  { type: "A", name: "a.pref.test", address: "127.0.0.2" },
  { type: "A", name: "b.pref.test", address: "127.0.0.3" },
  { type: "A", name: "c.pref.test", address: "127.0.0.4" },
  { type: "A", name: "backup.pref.test", address: "127.0.0.5" },
  { type: "AAAA", name: "backup.pref.test", address: "::1" },
  // No MX: the domain's own addresses.
  { type: "A", name: "implicit.test", address: "127.0.0.6" },
  { type: "TXT", name: "nothing.test", strings: ["no MX, no address"] },
  { type: "MX", name: "null.test", preference: 0, exchange: "." },
  // One host private, one public: only the public one without allowPrivate.
  { type: "MX", name: "mixed.test", preference: 10, exchange: "inside.mixed.test" },
  { type: "MX", name: "mixed.test", preference: 20, exchange: "outside.mixed.test" },
  { type: "A", name: "inside.mixed.test", address: "10.0.0.1" },
  { type: "A", name: "outside.mixed.test", address: PUBLIC_A },
  { type: "AAAA", name: "outside.mixed.test", address: "64:ff9b::a00:1" },
  // Only private addresses, one of them a NAT64 form of a private one.
  { type: "MX", name: "inside.test", preference: 10, exchange: "mx.inside.test" },
  { type: "A", name: "mx.inside.test", address: "192.168.1.1" },
  { type: "AAAA", name: "mx.inside.test", address: "64:ff9b::a9fe:a9fe" },
  // A host that is a CNAME.
  { type: "MX", name: "alias.test", preference: 5, exchange: "mx.alias.test" },
  { type: "CNAME", name: "mx.alias.test", target: "real.alias.test" },
  { type: "A", name: "real.alias.test", address: PUBLIC_B },
  // A host with no address.
  { type: "MX", name: "dangling.test", preference: 5, exchange: "gone.dangling.test" },
  // The domain's MX lookup times out; a host's address lookup times out.
  { type: "timeout", name: "slow.test" },
  { type: "MX", name: "slowhost.test", preference: 5, exchange: "mx.slow.test" },
  { type: "MX", name: "halfslow.test", preference: 5, exchange: "mx.slow.test" },
  { type: "MX", name: "halfslow.test", preference: 10, exchange: "outside.mixed.test" },
  { type: "servfail", name: "broken.test" },
];

/** A random source that gives the numbers in turn, then 0. */
const sequence =
  (...xs: number[]) =>
  () =>
    xs.shift() ?? 0;

describe("mxRoute against dnsmasq", () => {
  let dns: Dnsmasq;
  let resolve: Resolve;
  beforeAll(async () => {
    dns = await startDnsmasq(TABLE);
    resolve = dnsResolver({ server: dns.address, timeoutMs: 250, tries: 1 });
  });
  afterAll(async () => {
    await dns?.stop();
  });

  test("hosts by preference, equal preferences in the order the random source picks, addresses IPv4 first", async () => {
    const names = async (random: () => number) => {
      const r = await mxRoute(resolve, "pref.test", { allowPrivate: true, random });
      if (r.kind !== "route") throw new Error(r.reason);
      return r.hosts.map((h) => h.name);
    };
    // DNS may give the records in any order: the route sorts them before it shuffles.
    const sorted = (await names(sequence(0.99, 0.99))).slice(0, 3).sort();
    expect(sorted).toEqual(["a.pref.test", "b.pref.test", "c.pref.test"]);
    const first = await names(sequence(0, 0));
    const second = await names(sequence(0.99, 0.99));
    for (const order of [first, second]) expect(order[3]).toBe("backup.pref.test");
    // The shuffle applied to the sorted run: i=2 swaps with j=0, then i=1 with j=0.
    const run = ["a.pref.test", "b.pref.test", "c.pref.test"];
    expect(first.slice(0, 3)).toEqual(
      orderByPreference(
        run.map((exchange) => ({ exchange, preference: 10 })),
        sequence(0, 0),
      ).map((x) => x.exchange),
    );
    expect(second.slice(0, 3)).toEqual(run);
    const r = await mxRoute(resolve, "pref.test", { allowPrivate: true, random: sequence() });
    expect(r.kind === "route" && r.hosts[3]).toEqual({
      name: "backup.pref.test",
      preference: 20,
      addresses: ["127.0.0.5", "::1"],
    });
  });

  test("a domain without MX is its own mail host (implicit MX)", async () => {
    expect(await mxRoute(resolve, "implicit.test", { allowPrivate: true })).toEqual({
      kind: "route",
      hosts: [{ name: "implicit.test", preference: 0, addresses: ["127.0.0.6"] }],
      implicit: true,
    });
  });

  test("a null MX, a domain that does not exist, and one with neither MX nor address are permanent", async () => {
    expect(await mxRoute(resolve, "null.test", { allowPrivate: true })).toEqual({
      kind: "permanent",
      reason: 'null.test publishes a null MX ("0 ."): it accepts no mail (RFC 7505)',
      status: "5.1.10",
    });
    expect(await mxRoute(resolve, "nowhere.test")).toEqual({
      kind: "permanent",
      reason: "nowhere.test does not exist (NXDOMAIN)",
      status: "5.1.2",
    });
    expect(await mxRoute(resolve, "nothing.test")).toEqual({
      kind: "permanent",
      reason: "nothing.test has no MX record and no address (nothing.test has no address (no A or AAAA record))",
      status: "5.1.2",
    });
    expect(await mxRoute(resolve, "dangling.test")).toEqual({
      kind: "permanent",
      reason: "no MX host of dangling.test has an address (gone.dangling.test has no address (no A or AAAA record))",
      status: "5.1.2",
    });
    expect(await mxRoute(resolve, "[127.0.0.1]")).toEqual({
      kind: "permanent",
      reason: '"[127.0.0.1]" is not a domain name',
      status: "5.1.3",
    });
  });

  test("private addresses are dropped unless allowed; a domain with only those is refused", async () => {
    expect(await mxRoute(resolve, "mixed.test", { random: sequence() })).toEqual({
      kind: "route",
      hosts: [{ name: "outside.mixed.test", preference: 20, addresses: [PUBLIC_A] }],
      implicit: false,
    });
    const allowed = await mxRoute(resolve, "mixed.test", { allowPrivate: true, random: sequence() });
    expect(allowed.kind === "route" && allowed.hosts.map((h) => [h.name, h.addresses])).toEqual([
      ["inside.mixed.test", ["10.0.0.1"]],
      ["outside.mixed.test", [PUBLIC_A, "64:ff9b::a00:1"]],
    ]);
    expect(await mxRoute(resolve, "inside.test")).toEqual({
      kind: "permanent",
      reason:
        "the mail hosts of inside.test are on private or reserved addresses only (mx.inside.test 192.168.1.1, mx.inside.test 64:ff9b::a9fe:a9fe), which delivery does not connect to",
      status: "5.7.0",
    });
  });

  test("a host that is a CNAME is followed", async () => {
    expect(await mxRoute(resolve, "alias.test")).toEqual({
      kind: "route",
      hosts: [{ name: "mx.alias.test", preference: 5, addresses: [PUBLIC_B] }],
      implicit: false,
    });
  });

  test("DNS that does not answer is temporary, never permanent", async () => {
    const slow = await mxRoute(resolve, "slow.test");
    expect(slow.kind).toBe("temporary");
    expect(slow.kind === "temporary" && slow.reason).toMatch(/^the DNS lookup of MX slow\.test failed: no answer/);
    const host = await mxRoute(resolve, "slowhost.test");
    expect(host.kind === "temporary" && host.reason).toMatch(/^the DNS lookup of A mx\.slow\.test failed: no answer/);
    expect((await mxRoute(resolve, "broken.test")).kind).toBe("temporary");
    // One host slow, another resolved: the route is the one that resolved.
    const half = await mxRoute(resolve, "halfslow.test");
    expect(half.kind === "route" && half.hosts.map((h) => h.name)).toEqual(["outside.mixed.test"]);
  });

  test("routeLookup rejects with a RouteError that says whether it is permanent", async () => {
    const lookup = routeLookup(resolve, { allowPrivate: true });
    expect((await lookup("implicit.test")).hosts.map((h) => h.name)).toEqual(["implicit.test"]);
    const err = await lookup("null.test").catch((e) => e);
    expect(err).toBeInstanceOf(RouteError);
    expect((err as RouteError).permanent).toBe(true);
    expect((err as RouteError).status).toBe("5.1.10");
    expect(((await lookup("broken.test").catch((e) => e)) as RouteError).permanent).toBe(false);
  });
});

test("orderByPreference keeps preferences apart and shuffles only within one", () => {
  const records = [
    { preference: 30, exchange: "z" },
    { preference: 10, exchange: "b" },
    { preference: 10, exchange: "a" },
    { preference: 20, exchange: "m" },
  ];
  expect(orderByPreference(records, sequence(0.99)).map((r) => r.exchange)).toEqual(["a", "b", "m", "z"]);
  expect(orderByPreference(records, sequence(0)).map((r) => r.exchange)).toEqual(["b", "a", "m", "z"]);
  // Over many draws, each of the tied hosts comes first about as often.
  const firsts = new Map<string, number>();
  let seed = 1;
  const lcg = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const tied = ["a", "b", "c"].map((exchange) => ({ preference: 10, exchange }));
  for (let i = 0; i < 3000; i++) {
    const first = orderByPreference(tied, lcg)[0]!.exchange;
    firsts.set(first, (firsts.get(first) ?? 0) + 1);
  }
  for (const n of ["a", "b", "c"]) expect(firsts.get(n)!).toBeGreaterThan(850);
});

test("cachedRouteLookup: a route and a permanent refusal are kept for the TTL, shared while under way; a temporary failure is not kept", async () => {
  let now = 0;
  const asked: string[] = [];
  const answers: Record<string, () => Promise<{ hosts: RouteHost[] }>> = {
    "ok.test": async () => ({ hosts: [{ name: "mx.ok.test", preference: 10, addresses: ["192.0.2.1"] }] }),
    "null.test": async () => {
      throw new RouteError("null MX", true, "5.1.10");
    },
    "flaky.test": async () => {
      throw new RouteError("SERVFAIL", false);
    },
  };
  const lookup = cachedRouteLookup(
    (domain) => {
      asked.push(domain);
      return answers[domain]!();
    },
    { ttlMs: 60_000, nowMs: () => now },
  );
  await Promise.all([lookup("ok.test"), lookup("OK.test")]);
  await lookup("null.test").catch(() => {});
  await lookup("null.test").catch(() => {});
  await lookup("flaky.test").catch(() => {});
  await lookup("flaky.test").catch(() => {});
  expect(asked).toEqual(["ok.test", "null.test", "flaky.test", "flaky.test"]);
  now = 60_000;
  await lookup("ok.test");
  expect(asked.at(-1)).toBe("ok.test");
});
