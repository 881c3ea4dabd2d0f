import { expect, test } from "bun:test";
import { checkEndpoint } from "./endpoint";
import { JITTER, RETRY_SCHEDULE_MS, retryDelayMs } from "./schedule";
import { newWebhookSecret, signWebhook } from "./signature";
import { isPrivateAddress } from "../netguard/netguard";

test("the signature matches the Standard Webhooks reference vector", () => {
  // From the Standard Webhooks reference libraries' tests.
  const sig = signWebhook(
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "msg_p5jXN8AQM9LWM0D4loKWxJek",
    1614265330,
    '{"test": 2432232314}',
  );
  expect(sig).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
});

test("a secret is whsec_ and 24 random bytes in base64", () => {
  const a = newWebhookSecret();
  expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
  expect(Buffer.from(a.slice(6), "base64")).toHaveLength(24);
  expect(newWebhookSecret()).not.toBe(a);
});

test("retries: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each spread by 10% either way, then none", () => {
  expect(RETRY_SCHEDULE_MS).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  RETRY_SCHEDULE_MS.forEach((base, i) => {
    expect(retryDelayMs(i + 1, () => 0)).toBe(Math.round(base * (1 - JITTER)));
    expect(retryDelayMs(i + 1, () => 0.5)).toBe(base);
    expect(retryDelayMs(i + 1, () => 0.999999)).toBeLessThanOrEqual(Math.round(base * (1 + JITTER)));
  });
  expect(retryDelayMs(RETRY_SCHEDULE_MS.length + 1, () => 0.5)).toBeUndefined();
  expect(retryDelayMs(1, () => 0.5, 1_000)).toBe(5);
});

test("endpoints: an absolute http(s) URL and known event types, duplicates folded", () => {
  expect(
    checkEndpoint({ url: "https://hooks.example/in", events: ["email.queued", "email.queued", "subscriber.created"] }),
  ).toEqual({
    url: "https://hooks.example/in",
    events: ["email.queued", "subscriber.created"],
  });
  expect(checkEndpoint([])).toMatchObject({ field: "body" });
  expect(checkEndpoint({ url: "javascript:alert(1)", events: ["email.queued"] })).toMatchObject({ field: "url" });
  expect(checkEndpoint({ url: `https://x.example/${"a".repeat(2_048)}`, events: ["email.queued"] })).toMatchObject({
    field: "url",
  });
  expect(checkEndpoint({ url: "https://x.example", events: "email.queued" })).toMatchObject({ field: "events" });
  expect(checkEndpoint({ url: "https://x.example", events: [7] })).toMatchObject({ field: "events[0]" });
});

test("addresses: loopback, private, link-local and the like are refused, public addresses are not", () => {
  for (const ip of [
    "127.0.0.1",
    "10.1.2.3",
    "172.20.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "::1",
    "::",
    "fd00::1",
    "fe80::1",
    "::ffff:127.0.0.1",
  ]) {
    expect({ ip, private: isPrivateAddress(ip) }).toEqual({ ip, private: true });
  }
  for (const ip of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
    expect({ ip, private: isPrivateAddress(ip) }).toEqual({ ip, private: false });
});
