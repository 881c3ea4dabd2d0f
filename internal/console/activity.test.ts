// The emails page's filters as a browser's form sends them.
import { expect, test } from "bun:test";
import { emailFilterForm, rfc3339 } from "./activity";

test("a datetime input's value is RFC 3339 in UTC, to the minute or the second; anything else is left to the API's check", () => {
  expect(rfc3339("2026-11-28T09:30")).toBe("2026-11-28T09:30:00Z");
  expect(rfc3339("2026-11-28T09:30:15")).toBe("2026-11-28T09:30:15Z");
  expect(rfc3339("2026-11-28T09:30:00Z")).toBe("2026-11-28T09:30:00Z");
  expect(rfc3339("yesterday")).toBe("yesterday");
  expect(rfc3339("")).toBe("");
});

test("the form's filters, trimmed, missing ones empty", () => {
  const q = new URLSearchParams({ status: " bounced ", to: "kim@example.org", after: "2026-11-01T00:00" });
  expect(emailFilterForm(q)).toEqual({
    status: "bounced",
    lane: "",
    to: "kim@example.org",
    tag: "",
    after: "2026-11-01T00:00:00Z",
    before: "",
  });
});
