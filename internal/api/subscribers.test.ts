// The audience bodies' validation: the subscriber address rule, and that hostile addresses
// are refused in microseconds (a batch is validated on the event loop).
import { expect, test } from "bun:test";
import { InvalidField } from "./invalid_field";
import { parseBatch, subscriberEmail } from "./subscribers";

const accepted = (e: string) => {
  try {
    subscriberEmail("email", e);
    return true;
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return false;
  }
};

test("one bare address: dot-atom local part (UTF-8 allowed, up to 64), a host of two labels or more", () => {
  for (const e of [
    "a@b.co",
    " a.b@c.d.e ",
    "o'neil+x@ex-ample.com",
    "jörg@bücher.de",
    "用户@例子.广告",
    `${"x".repeat(64)}@b.cd`,
  ])
    expect({ e, ok: accepted(e) }).toEqual({ e, ok: true });
  for (const e of [
    "",
    "a",
    "a@b",
    "a..b@c.de",
    ".a@b.cd",
    "a.@b.cd",
    "a@-b.cd",
    "a@b-.cd",
    "a b@c.de",
    "a@b..cd",
    "Name <a@b.cd>",
    '"q"@b.cd',
    "a@[1.2.3.4]",
    "a(c)@b.cd",
    `${"x".repeat(65)}@b.cd`,
    `a@${"b".repeat(250)}.cd`,
  ]) {
    expect({ e, ok: accepted(e) }).toEqual({ e, ok: false });
  }
});

test("a batch of 1,000 hostile addresses is refused item by item, fast", () => {
  const hostile = [
    `${"(".repeat(120)}a@b.cd${")".repeat(120)}`,
    `${"a.".repeat(120)}@b.cd`,
    `${'"'.repeat(120)}a@b.cd`,
    `${"a ".repeat(120)}@b.cd`,
  ];
  const started = performance.now();
  const items = parseBatch({
    subscribers: Array.from({ length: 1_000 }, (_, i) => ({ email: hostile[i % hostile.length]!.slice(0, 254) })),
  });
  const ms = performance.now() - started;
  expect(items.every((item) => !item.ok && item.error.field.endsWith(".email"))).toBe(true);
  // The RFC 5322 parser takes 17 to 270 ms for each of these: minutes for the batch.
  expect(ms).toBeLessThan(1_000);
});
