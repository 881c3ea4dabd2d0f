// The directory service's checks of what a request names, alone: slugs, domains, token names,
// plans, and an organization's spec made of them.
import { expect, test } from "bun:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { CreateOrganizationRequestSchema, Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { hashToken } from "../token/token";
import { checkDomain, checkPlan, checkSlug, checkTokenName, toSpec } from "./directory_service";

const invalid = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return err instanceof ConnectError && err.code === Code.InvalidArgument;
  }
  return false;
};

test("slugs: 1-63 lower-case letters, digits or inner hyphens", () => {
  for (const ok of ["a", "acme", "a-1", "x".repeat(63)]) expect(checkSlug(ok)).toBe(ok);
  for (const bad of ["", "-a", "a-", "Acme", "a_b", "x".repeat(64)]) expect(invalid(() => checkSlug(bad))).toBe(true);
});

test("domains are trimmed and lower-cased; a name that is not one is refused", () => {
  expect(checkDomain(" Mail.Example.COM ")).toBe("mail.example.com");
  for (const bad of ["example", "a..example.com", "-a.example.com", "example.c0m.1", `${"a".repeat(250)}.com`])
    expect(invalid(() => checkDomain(bad))).toBe(true);
});

test("token names: trimmed, 'default' when empty, at most 100 printable characters", () => {
  expect(checkTokenName("  ci ")).toBe("ci");
  expect(checkTokenName("   ")).toBe("default");
  expect(checkTokenName("x".repeat(100))).toHaveLength(100);
  expect(invalid(() => checkTokenName("x".repeat(101)))).toBe(true);
  expect(invalid(() => checkTokenName("a\nb"))).toBe(true);
});

test("plans: only the ones offered", () => {
  expect(checkPlan(Plan.PREMIUM)).toBe(Plan.PREMIUM);
  expect(invalid(() => checkPlan(Plan.UNSPECIFIED))).toBe(true);
  expect(invalid(() => checkPlan(42 as Plan))).toBe(true);
});

test("a spec holds each domain once (the last flag wins) and only the hash of the token it asks for", () => {
  const req = create(CreateOrganizationRequestSchema, {
    slug: "acme",
    plan: Plan.FREE,
    domains: [
      { name: "A.example", verified: false },
      { name: "a.example", verified: true },
      { name: "b.example", verified: false },
    ],
    withToken: true,
    tokenName: "",
  });
  const { spec, token } = toSpec(req, () => "mc_new");
  expect(token).toBe("mc_new");
  expect(spec).toEqual({
    slug: "acme",
    plan: Plan.FREE,
    domains: [
      { name: "a.example", verified: true },
      { name: "b.example", verified: false },
    ],
    token: { hash: hashToken("mc_new"), name: "default" },
  });
  const without = toSpec({ ...req, withToken: false }, () => "mc_unused");
  expect(without.token).toBeUndefined();
  expect(without.spec).not.toHaveProperty("token");
});
