import { describe, expect, test } from "bun:test";
import { clientIp, normalizeIp } from "./clientip";

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
