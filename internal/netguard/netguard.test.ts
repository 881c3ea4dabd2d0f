import { expect, test } from "bun:test";
import { embeddedIPv4, isPrivateAddress } from "./netguard";

const PRIVATE = [
  "10.1.2.3",
  "172.20.0.1",
  "192.168.1.1",
  "127.0.0.2",
  "169.254.169.254",
  "100.64.0.1", // CGNAT
  "0.0.0.0",
  "224.0.0.1",
  "255.255.255.255",
  "192.0.2.10",
  "::1",
  "::",
  "fd00::1", // unique local
  "fe80::1%eth0",
  "ff02::1",
  "::ffff:127.0.0.1", // IPv4-mapped
  "::ffff:a00:1", // the same, in hex
  "::10.0.0.1", // IPv4-compatible
  "64:ff9b::10.0.0.1", // NAT64
  "64:ff9b::a9fe:a9fe", // NAT64 of the metadata address
  "64:ff9b:1::1", // local-use NAT64
  "2002:c0a8:101::1", // 6to4 of 192.168.1.1
  "2002:7f00:1::", // 6to4 of 127.0.0.1
  "2001:0:4136:e378:8000:63bf:f5ff:fffe", // Teredo, client 10.0.0.1
  "2001:db8::1",
  "not an address",
];
const PUBLIC = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.215.14",
  "2606:4700:4700::1111",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808", // NAT64 of 8.8.8.8
  "2002:808:808::1", // 6to4 of 8.8.8.8
  "2a00:1450:4001:81b::200e",
];

test("private, loopback, link-local, CGNAT, unique-local, multicast and embedded private addresses are refused", () => {
  for (const ip of PRIVATE) expect({ ip, private: isPrivateAddress(ip) }).toEqual({ ip, private: true });
  for (const ip of PUBLIC) expect({ ip, private: isPrivateAddress(ip) }).toEqual({ ip, private: false });
});

test("the IPv4 address an IPv6 address carries", () => {
  expect(embeddedIPv4("::ffff:10.0.0.1")).toBe("10.0.0.1");
  expect(embeddedIPv4("64:ff9b::c0a8:101")).toBe("192.168.1.1");
  expect(embeddedIPv4("2002:c0a8:101::1")).toBe("192.168.1.1");
  expect(embeddedIPv4("2001:0:4136:e378:8000:63bf:f5ff:fffe")).toBe("10.0.0.1");
  expect(embeddedIPv4("2606:4700:4700::1111")).toBeUndefined();
  expect(embeddedIPv4("::1")).toBeUndefined();
  expect(embeddedIPv4("10.0.0.1")).toBeUndefined();
});
