import { expect, test } from "bun:test";
import { fixtureKind, normalizeMailbox } from "./policy";

test("mailboxes are lower-cased with any +tag removed", () => {
  expect(normalizeMailbox("Jane.Doe+Promo@Example.COM")).toBe("jane.doe@example.com");
  expect(normalizeMailbox("a+b+c@x.io")).toBe("a@x.io");
  expect(normalizeMailbox("plain@x.io")).toBe("plain@x.io");
});

test("fixture addresses", () => {
  expect(fixtureKind("bounced+signup-test@fixtures.test")).toBe("bounced");
  expect(fixtureKind("Delivered@Fixtures.Test")).toBe("delivered");
  expect(fixtureKind("someone@fixtures.test")).toBe("delivered");
  expect(fixtureKind("user@example.com")).toBeUndefined();
  expect(fixtureKind("delivered@fixtures.test.example.com")).toBeUndefined();
});
