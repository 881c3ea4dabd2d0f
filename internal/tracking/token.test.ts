import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { clickUrl, MAX_TRACKED_URL, openUrl, readToken, signToken, type TrackingTarget } from "./token";

const KEY = "k".repeat(32);
const OLD_KEY = Buffer.alloc(32, 7);
const click: TrackingTarget = {
  kind: "click",
  messageId: "msg_01H",
  link: 2,
  links: 5,
  url: "https://shop.example/p?id=1&utm=x",
};

/** A token made by hand in the documented format: base64url(JSON) "." base64url(first 16 bytes of the HMAC). */
function forge(fields: unknown, key: string | Uint8Array = KEY): string {
  const payload = Buffer.from(JSON.stringify(fields)).toString("base64url");
  const mac = createHmac("sha256", key).update(`mailcore tracking token\n${payload}`).digest().subarray(0, 16);
  return `${payload}.${mac.toString("base64url")}`;
}

describe("tokens", () => {
  test("a click token reads back what it names; an open token too", () => {
    expect(readToken(signToken(click, KEY), [KEY])).toEqual(click);
    const open: TrackingTarget = { kind: "open", messageId: "msg_01H" };
    expect(readToken(signToken(open, KEY), [KEY])).toEqual(open);
  });

  test("the format is pinned: a token made by hand by the documented rule reads", () => {
    expect(signToken(click, KEY)).toBe(forge([1, "c", "msg_01H", 2, 5, "https://shop.example/p?id=1&utm=x"]));
  });

  test("only the keys given verify it: a retired key still does while it is listed", () => {
    const token = signToken(click, OLD_KEY);
    expect(readToken(token, [KEY])).toBeUndefined();
    expect(readToken(token, [KEY, OLD_KEY])).toEqual(click);
  });

  test("a changed URL, message or signature does not verify: never an open redirect", () => {
    const token = signToken(click, KEY);
    const [payload, mac] = token.split(".") as [string, string];
    const other = Buffer.from(
      Buffer.from(payload, "base64url").toString().replace("shop.example", "evil.example"),
    ).toString("base64url");
    expect(readToken(`${other}.${mac}`, [KEY])).toBeUndefined();
    const flipped = `${payload}.${mac.startsWith("A") ? "B" : "A"}${mac.slice(1)}`;
    expect(readToken(flipped, [KEY])).toBeUndefined();
    expect(readToken(`${payload}.${mac}x`, [KEY])).toBeUndefined();
  });

  test("signed but not well formed: refused", () => {
    for (const fields of [
      [1, "c", "msg_1", 0, 1, "javascript:alert(1)"],
      [1, "c", "msg_1", 0, 1, "ftp://files.example/"],
      [1, "c", "msg_1", 1, 1, "https://a.example/"],
      [1, "c", "msg_1", -1, 1, "https://a.example/"],
      [1, "c", "msg_1", 0.5, 1, "https://a.example/"],
      [1, "c", "", 0, 1, "https://a.example/"],
      [1, "c", "msg_1", 0, 1, `https://a.example/${"x".repeat(MAX_TRACKED_URL)}`],
      [2, "o", "msg_1"],
      [1, "o", "msg_1", "extra"],
      [1, "x", "msg_1"],
      { kind: "open", messageId: "msg_1" },
      "msg_1",
    ]) {
      expect(readToken(forge(fields), [KEY])).toBeUndefined();
    }
  });

  test("garbage is refused before any work", () => {
    for (const token of [
      "",
      ".",
      "a.b.c",
      "@@@.@@@",
      `${"a".repeat(5_000)}.${"b".repeat(22)}`,
      "bm90IGpzb24.AAAAAAAAAAAAAAAAAAAAAA",
    ]) {
      expect(readToken(token, [KEY])).toBeUndefined();
    }
  });

  test("URLs under PUBLIC_URL, with or without a trailing slash", () => {
    expect(openUrl("https://mail.example/", "msg_1", KEY)).toMatch(/^https:\/\/mail\.example\/t\/o\/[\w-]+\.[\w-]+$/);
    const { kind: _, ...target } = click as Extract<TrackingTarget, { kind: "click" }>;
    const url = clickUrl("https://mail.example", target, KEY);
    expect(url).toMatch(/^https:\/\/mail\.example\/t\/c\/[\w-]+\.[\w-]+$/);
    expect(readToken(url.split("/t/c/")[1]!, [KEY])).toEqual(click);
  });
});
