// Admission tickets alone, with a clock the test moves: what a ticket says, how long it is good
// for, and every way a ticket that is not the daemon's own is told apart.
import { expect, test } from "bun:test";
import { TICKET_MIN_LEFT_MS, TICKET_TTL_MS, Tickets } from "./tickets";

const KEY = Buffer.alloc(32, 1);

function clocked(startMs = 1_700_000_000_000) {
  let now = startMs;
  return { tickets: new Tickets(KEY, () => now), advance: (ms: number) => (now += ms) };
}

test("a ticket names its organization, its expiry in Unix seconds and a 128-bit MAC", () => {
  const { tickets } = clocked();
  const ticket = tickets.issue("org_0123456789abcdef");
  expect(ticket).toMatch(/^org_0123456789abcdef\.1700000120\.[A-Za-z0-9_-]{22}$/);
  expect(tickets.check(ticket)).toEqual({ orgId: "org_0123456789abcdef" });
  // Another daemon with the same key checks it; one with another key does not.
  expect(new Tickets(KEY, () => 1_700_000_000_000).check(ticket)).toEqual({ orgId: "org_0123456789abcdef" });
  expect(new Tickets(Buffer.alloc(32, 2), () => 1_700_000_000_000).check(ticket)).toEqual({ refused: "forged" });
});

test("an organization's ticket is made again only once it has less than a minute left; it lasts two", () => {
  const { tickets, advance } = clocked();
  const first = tickets.issue("org_a");
  advance(TICKET_TTL_MS - TICKET_MIN_LEFT_MS);
  expect(tickets.issue("org_a")).toBe(first);
  expect(tickets.issue("org_b")).not.toBe(first);
  advance(1);
  const second = tickets.issue("org_a");
  expect(second).not.toBe(first);
  // Every ticket handed out was good for at least a minute from then: the first one still is.
  expect(tickets.check(first)).toEqual({ orgId: "org_a" });
  advance(TICKET_MIN_LEFT_MS - 1);
  expect(tickets.check(first)).toEqual({ refused: "expired" });
  expect(tickets.check(second)).toEqual({ orgId: "org_a" });
});

test("expired, forged and malformed tickets are refused, each said apart", () => {
  const { tickets, advance } = clocked();
  const alpha = tickets.issue("org_alpha");
  const [, expires, mac] = alpha.split(".");
  expect(tickets.check(`org_beta.${expires}.${mac}`)).toEqual({ refused: "forged" });
  expect(tickets.check(`org_alpha.${Number(expires) + 3_600}.${mac}`)).toEqual({ refused: "forged" });
  expect(tickets.check(`org_alpha.${expires}.${"A".repeat(22)}`)).toEqual({ refused: "forged" });
  for (const bad of [
    "",
    "org_alpha",
    `org_alpha.${expires}`,
    `.${expires}.${mac}`,
    `org_alpha.x.${mac}`,
    `org_alpha.${expires}.short`,
  ])
    expect([bad, tickets.check(bad)]).toEqual([bad, { refused: "malformed" }]);
  // An id with dots of its own still names exactly what was signed.
  const dotted = tickets.issue("org.with.dots");
  expect(tickets.check(dotted)).toEqual({ orgId: "org.with.dots" });
  // A ticket that was good once is refused when it expires, also from the verified cache.
  expect(tickets.check(alpha)).toEqual({ orgId: "org_alpha" });
  advance(TICKET_TTL_MS);
  expect(tickets.check(alpha)).toEqual({ refused: "expired" });
});
