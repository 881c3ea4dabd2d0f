// The admission service's helpers alone: the tags that ride along with an admission, kept by
// the organization's audience stamp and an age cap; and what the fronts read of an admission.
import { expect, test } from "bun:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { OrgRef } from "../hotstore/hotstore";
import type { TagCount } from "../records/audience";
import { hashToken } from "../token/token";
import { TagCache, toAdmission, toAdmitInput } from "./admission_service";

/** Tag counts that change on every read, and the organizations each read asked for. */
function countingAudience() {
  const reads: string[][] = [];
  return {
    reads,
    async tagCounts(orgIds: string[]): Promise<Map<string, TagCount[]>> {
      reads.push(orgIds);
      return new Map(orgIds.map((id) => [id, [{ name: `read-${reads.length}`, subscribers: 1 }]]));
    },
  };
}

const org = (id: string, audienceStamp?: string): OrgRef => ({ id, slug: id, plan: Plan.FREE, audienceStamp });

test("tags are served from memory while the stamp is the one they were read under, and read again when it changes", async () => {
  const audience = countingAudience();
  const cache = new TagCache(audience, () => 0);
  expect((await cache.tagsOf([org("a", "s1")])).get("a")![0]!.name).toBe("read-1");
  expect((await cache.tagsOf([org("a", "s1")])).get("a")![0]!.name).toBe("read-1");
  expect((await cache.tagsOf([org("a", "s2")])).get("a")![0]!.name).toBe("read-2");
  expect(audience.reads).toEqual([["a"], ["a"]]);
});

test("tags are read again after 10 s whatever the stamp, and never kept without one", async () => {
  const audience = countingAudience();
  let now = 0;
  const cache = new TagCache(audience, () => now);
  await cache.tagsOf([org("a", "s1"), org("b")]);
  now = 9_999;
  await cache.tagsOf([org("a", "s1"), org("b")]);
  now = 10_000;
  await cache.tagsOf([org("a", "s1")]);
  expect(audience.reads).toEqual([["a", "b"], ["b"], ["a"]]);
});

test("a records failure reading tags is UNAVAILABLE", async () => {
  const cache = new TagCache({ tagCounts: () => Promise.reject(new Error("records down")) });
  const err = await cache.tagsOf([org("a", "s1")]).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConnectError);
  expect((err as ConnectError).code).toBe(Code.Unavailable);
});

test("an admission in whole seconds: the reset rounded up, a wait of at least one second; a ticket when allowed", () => {
  const tickets = { issue: (orgId: string) => `ticket of ${orgId}` };
  const base = { verdict: Verdict.ORG_LIMITED, org: org("a"), remaining: 0, resetMs: 1_001 };
  expect(toAdmission({ ...base, retryAfterMs: 1 }, tickets, 0)).toMatchObject({
    resetSeconds: 2,
    retryAfterSeconds: 1,
    ticket: "",
  });
  expect(toAdmission({ ...base, retryAfterMs: 2_500 }, tickets, 0)).toMatchObject({ retryAfterSeconds: 3 });
  expect(toAdmission({ ...base, verdict: Verdict.ALLOWED, retryAfterMs: 0 }, tickets, 0)).toMatchObject({
    orgId: "a",
    plan: Plan.FREE,
    retryAfterSeconds: 0,
    ticket: "ticket of a",
  });
  // No organization: the minimum plan's limit, and no ticket.
  expect(
    toAdmission({ verdict: Verdict.UNAUTHENTICATED, remaining: 0, resetMs: 0, retryAfterMs: 0 }, tickets, 0),
  ).toMatchObject({ orgId: "", plan: Plan.FREE, ticket: "" });
});

test("an admission's input: a malformed token counts against the IP as no token; an IPv6 client by its /64; a client IP must be one", () => {
  const token = `mc_${"a".repeat(43)}`;
  expect(toAdmitInput({ token, clientIp: "192.0.2.1", withTags: false }, 64)).toEqual({
    tokenHash: hashToken(token),
    ip: "192.0.2.1",
  });
  expect(toAdmitInput({ token: "nope", clientIp: "2001:db8::1:2:3:4", withTags: false }, 64)).toEqual({
    tokenHash: null,
    ip: "2001:db8::",
  });
  expect(toAdmitInput({ token: "nope", clientIp: "2001:db8::1:2:3:4", withTags: false }, 128).ip).toBe(
    "2001:db8::1:2:3:4",
  );
  expect(() => toAdmitInput({ token, clientIp: "localhost", withTags: false }, 64)).toThrow(
    "client_ip is not an IP address",
  );
});
