import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../config/config";
import { tempDir } from "../testkit/testkit";
import { matchesAny } from "./reply";
import { loadShaping, parseShaping, ruleFor } from "./shaping";

const shaping = loadShaping();

test.each([
  [["gmail-smtp-in.l.google.com", "alt1.gmail-smtp-in.l.google.com"], "google", 5, 50, true],
  [["aspmx.l.google.com"], "google", 5, 50, true],
  [["mta5.am0.yahoodns.net"], "yahoo", 10, 20, false],
  [["hotmail-com.olc.protection.outlook.com"], "outlook", 5, 50, false],
  [["example-com.mail.protection.outlook.com"], "outlook", 5, 50, false],
  [["mx.example.org", "aspmx.l.google.com"], "google", 5, 50, true],
  [["mx.example.org"], "default", 10, 100, false],
  [["google.com.evil.example"], "default", 10, 100, false],
] as const)("the default file: %p gets rule %s", (hosts, name, connections, perConnection, tls) => {
  const rule = ruleFor(shaping, [...hosts]);
  expect(rule.name).toBe(name);
  expect(rule.limits.connections).toBe(connections);
  expect(rule.limits.messagesPerConnection).toBe(perConnection);
  expect(rule.limits.tlsRequired).toBe(tls);
});

test("the default file's rate-limit replies", () => {
  const yes = [
    "421 4.7.28 [1.2.3.4] Our system has detected an unusual rate of unsolicited mail",
    "451 4.7.650 The mail server [1.2.3.4] has been temporarily rate limited due to IP reputation.",
    "421 4.7.0 [TSS04] Messages from 1.2.3.4 temporarily deferred",
    "450 Too many connections from your IP",
    "421 Server busy. Please try again later from [1.2.3.4]",
  ];
  const no = [
    "451 4.7.1 Greylisted, please try again in 300 seconds",
    "450 4.2.2 Mailbox full",
    "421 4.3.2 Shutting down",
  ];
  for (const r of yes) expect([r, matchesAny(r, shaping.rateLimitReplies)]).toEqual([r, true]);
  for (const r of no) expect([r, matchesAny(r, shaping.rateLimitReplies)]).toEqual([r, false]);
});

test("an operator's file replaces the default, and is checked", () => {
  const dir = tempDir();
  const path = join(dir, "shaping.json");
  const doc = {
    default: { connections: 2, messagesPerConnection: 3, messagesPerMinute: 60, tlsRequired: true },
    rules: [{ name: "lab", mxSuffixes: ["mx.lab.test"], connections: 1 }],
    rateLimitReplies: ["slow down"],
    slowdown: { minutes: 5, connections: 1, messagesPerMinute: 1 },
  };
  writeFileSync(path, JSON.stringify(doc));
  const s = loadShaping(path);
  expect(ruleFor(s, ["a.mx.lab.test"]).limits).toEqual({
    connections: 1,
    messagesPerConnection: 3,
    messagesPerMinute: 60,
    tlsRequired: true,
  });
  expect(ruleFor(s, ["mx.lab.test"]).name).toBe("lab");
  expect(ruleFor(s, ["xmx.lab.test"]).name).toBe("default");
  expect(s.slowdown).toEqual({ forMs: 300_000, connections: 1, messagesPerMinute: 1 });
});

test.each([
  [{ rules: [{ name: "x", mxSuffixes: [".a.test"], connections: 0 }] }, "/rules/0/connections must be >= 1"],
  [{ rules: [{ name: "x", mxSuffixes: [".a.test"], conections: 2 }] }, "must NOT have additional properties"],
  [{ rules: [{ name: "x", mxSuffixes: ["a b"] }] }, "/rules/0/mxSuffixes/0 must match pattern"],
  [{ rateLimitReplies: ["("] }, "rateLimitReplies: Invalid regular expression"],
  [{ default: { connections: 1 } }, "/default must have required property 'messagesPerConnection'"],
])("a bad file is refused with what is wrong: %p", (change, message) => {
  const doc = { ...JSON.parse(JSON.stringify(shapingDoc())), ...change };
  expect(() => parseShaping(doc, "test.json")).toThrow(message);
});

test("a file that is not JSON is refused with its path", () => {
  const path = join(tempDir(), "bad.json");
  writeFileSync(path, "{ not json");
  expect(() => loadShaping(path)).toThrow(path);
  expect(() => loadShaping(path)).toThrow(ConfigError); // a process loading it at start exits with the line
});

function shapingDoc() {
  return {
    default: { connections: 10, messagesPerConnection: 100, messagesPerMinute: 6000, tlsRequired: false },
    rules: [],
    rateLimitReplies: [],
    slowdown: { minutes: 15, connections: 1, messagesPerMinute: 10 },
  };
}
