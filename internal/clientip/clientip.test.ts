import { describe, expect, test } from "bun:test";
import { addressGroup, clientIp, ipv6Bytes, ipv6Text, normalizeIp } from "./clientip";

describe("clientIp", () => {
  const proxies = ["10.0.0.1", "10.0.0.2"];
  test.each([
    ["no proxy trusted: the socket peer, whatever the header says", "10.0.0.1", "1.2.3.4", [], "10.0.0.1"],
    ["a peer that is not a trusted proxy cannot spoof", "192.0.2.9", "1.2.3.4", proxies, "192.0.2.9"],
    ["a trusted proxy: its right-most forwarded address", "10.0.0.1", "6.6.6.6, 1.2.3.4", proxies, "1.2.3.4"],
    [
      "a chain of trusted proxies is walked from the right",
      "10.0.0.1",
      "6.6.6.6, 1.2.3.4, 10.0.0.2",
      proxies,
      "1.2.3.4",
    ],
    ["a malformed entry stops the walk", "10.0.0.1", "1.2.3.4, junk", proxies, "10.0.0.1"],
    ["no header: the peer", "10.0.0.1", null, proxies, "10.0.0.1"],
    ["IPv4-mapped peer", "::ffff:10.0.0.1", "2001:db8::1", proxies, "2001:db8::1"],
  ] as const)("%s", (_, peer, xff, trusted, want) => {
    expect(clientIp(peer, xff, trusted)).toBe(want);
  });

  test("normalizeIp", () => {
    expect(normalizeIp("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(normalizeIp("::1")).toBe("::1");
  });
});

describe("addressGroup: the client a per-address limit counts", () => {
  test.each([
    ["an IPv4 address is itself", "192.0.2.7", 64, "192.0.2.7"],
    ["an IPv4-mapped address is its IPv4 address", "::ffff:192.0.2.7", 64, "192.0.2.7"],
    ["an IPv6 address is its /64", "2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::"],
    ["every address of one /64 is one client", "2001:db8:1:2::ffff", 64, "2001:db8:1:2::"],
    ["another /64 is another client", "2001:db8:1:3::1", 64, "2001:db8:1:3::"],
    ["a /48 when configured so", "2001:db8:1:2:3::1", 48, "2001:db8:1::"],
    ["a prefix that ends inside a group", "2001:db8:1:2ff::1", 56, "2001:db8:1:200::"],
    ["128 bits: each address alone", "2001:db8::1:0:0:1", 128, "2001:db8::1:0:0:1"],
    ["loopback", "::1", 64, "::"],
    ["a zone is dropped", "fe80::1:2:3:4%eth0", 64, "fe80::"],
    ["upper case and leading zeros are one client", "2001:0DB8:0001:0002::1", 64, "2001:db8:1:2::"],
  ] as const)("%s", (_, ip, bits, want) => {
    expect(addressGroup(ip, bits)).toBe(want);
  });

  test("the text is canonical (RFC 5952)", () => {
    const text = (s: string) => ipv6Text(ipv6Bytes(s));
    expect(text("2001:db8:0:0:1:0:0:1")).toBe("2001:db8::1:0:0:1");
    expect(text("2001:0:0:1:0:0:0:1")).toBe("2001:0:0:1::1");
    expect(text("2001:db8:0:1:1:1:1:1")).toBe("2001:db8:0:1:1:1:1:1");
    expect(text("::")).toBe("::");
    expect(text("1::")).toBe("1::");
    expect(text("::ffff:1.2.3.4")).toBe("::ffff:102:304");
  });
});
