// The hours the usage page reads: enough for the last 30 days and for this month.
import { expect, test } from "bun:test";
import { figuresRange } from "./usage";

const at = (iso: string) => {
  const { sinceMs, untilMs } = figuresRange(Date.parse(iso));
  return { since: new Date(Number(sinceMs)).toISOString(), until: new Date(Number(untilMs)).toISOString() };
};

test("early in a month: from 29 days before today, to the end of this hour", () => {
  expect(at("2026-11-05T10:20:00Z")).toEqual({ since: "2026-10-07T00:00:00.000Z", until: "2026-11-05T11:00:00.000Z" });
});

test("on the 31st of a month: from the first of the month, which is further back", () => {
  expect(at("2026-12-31T23:59:59Z")).toEqual({ since: "2026-12-01T00:00:00.000Z", until: "2027-01-01T00:00:00.000Z" });
});

test("on the hour: the hour under way is included", () => {
  expect(at("2026-11-05T10:00:00Z").until).toBe("2026-11-05T11:00:00.000Z");
});
