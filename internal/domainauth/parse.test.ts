import { expect, test } from "bun:test";
import { isDmarcRecord, isSpfRecord, parseDmarc, parseSpf, spfAuthorizes, verificationToken } from "./parse";

const INCLUDE = "spf.platform.test";

function authorizes(text: string): true | string {
  const r = parseSpf(text);
  if (!r.ok) return r.reason;
  const a = spfAuthorizes(r.record, INCLUDE);
  return a.ok ? true : a.reason;
}

test("SPF: which TXT records are SPF records", () => {
  expect(isSpfRecord("v=spf1 -all")).toBe(true);
  expect(isSpfRecord("V=SPF1")).toBe(true);
  expect(isSpfRecord("v=spf10 -all")).toBe(false);
  expect(isSpfRecord(" v=spf1 -all")).toBe(false);
  expect(isSpfRecord("google-site-verification=x")).toBe(false);
});

test("SPF: the include authorizes where a receiver reaches it with a pass", () => {
  expect(authorizes(`v=spf1 include:${INCLUDE} -all`)).toBe(true);
  expect(authorizes(`v=spf1 ip4:192.0.2.0/24 +include:${INCLUDE.toUpperCase()}. ~all`)).toBe(true);
  expect(authorizes(`v=spf1  mx  include:${INCLUDE}   -all`)).toBe(true);
  expect(authorizes(`v=spf1 redirect=${INCLUDE}`)).toBe(true);
  expect(authorizes(`v=spf1 include:other.test include:${INCLUDE} exp=explain.test -all`)).toBe(true);
});

test("SPF: what does not authorize, and why", () => {
  expect(authorizes("v=spf1 include:other.test -all")).toBe(`the record has no include:${INCLUDE}`);
  expect(authorizes(`v=spf1 -all include:${INCLUDE}`)).toBe(
    `include:${INCLUDE} must come before "-all": receivers stop there`,
  );
  expect(authorizes(`v=spf1 ~include:${INCLUDE} -all`)).toBe(
    `include:${INCLUDE} has the qualifier "~": it must pass (no qualifier)`,
  );
  expect(authorizes(`v=spf1 include:${INCLUDE} -all redirect=other.test redirect=x.test`)).toBe(
    "redirect= appears twice (receivers give a permanent error)",
  );
  expect(authorizes(`v=spf1 include:${INCLUDE} allow -all`)).toBe(
    '"allow" is not an SPF mechanism (receivers give a permanent error)',
  );
  expect(authorizes(`v=spf1 -all redirect=${INCLUDE}`)).toBe(`the record has no include:${INCLUDE}`);
  expect(authorizes("v=spf1 include -all")).toBe("include needs a domain: include:<domain>");
  expect(authorizes("v=spf1 all:x.test")).toBe('"all:x.test": all takes no value');
  expect(authorizes("spf1 include:x")).toBe("the record does not start with v=spf1");
});

test("DMARC: the record, its policy, and what receivers cannot read", () => {
  expect(isDmarcRecord("v=DMARC1; p=none")).toBe(true);
  expect(isDmarcRecord("v = DMARC1 ;p=none")).toBe(true);
  expect(isDmarcRecord("p=none; v=DMARC1")).toBe(false);
  expect(isDmarcRecord("v=DMARC10; p=none")).toBe(false);
  const r = parseDmarc("v=DMARC1;p=quarantine; sp=reject;rua=mailto:a@example.test;");
  expect(r.ok && [r.record.policy, r.record.subdomainPolicy, r.record.rua]).toEqual([
    "quarantine",
    "reject",
    "mailto:a@example.test",
  ]);
  // No valid p= but reports asked for: read as p=none (RFC 7489 6.6.3).
  expect(parseDmarc("v=DMARC1; rua=mailto:a@example.test").ok).toBe(true);
  expect(parseDmarc("v=DMARC1; p=maybe; rua=mailto:a@example.test")).toMatchObject({ ok: true });
  expect(parseDmarc("v=DMARC1; p=maybe")).toEqual({ ok: false, reason: "p=maybe is not none, quarantine or reject" });
  expect(parseDmarc("v=DMARC1")).toEqual({ ok: false, reason: "the record has no p= tag" });
  expect(parseDmarc("v=DMARC1; p=none; sp=all")).toEqual({
    ok: false,
    reason: "sp=all is not none, quarantine or reject",
  });
  expect(parseDmarc("v=DMARC1; p=none; p=reject")).toEqual({
    ok: false,
    reason: "the tag p= appears twice, which makes the whole record invalid",
  });
});

test("the ownership record's value", () => {
  expect(verificationToken("mailcore-verify=abc123")).toBe("abc123");
  expect(verificationToken("  mailcore-verify = abc123 ")).toBe("abc123");
  expect(verificationToken("mailcore-verify=")).toBeUndefined();
  expect(verificationToken('"mailcore-verify=abc123"')).toBeUndefined();
  expect(verificationToken("other=abc123")).toBeUndefined();
});
