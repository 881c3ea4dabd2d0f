// The console's sign-in throttle as an attacker goes at it, over real processes (limiterd and an
// API, trusting X-Forwarded-For from this test as it would from a proxy): wrong sign-ins sent
// all at once, for one known account and for many, from one address and from one IPv6 /64.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runToEnd, type Stack, startStack } from "../testkit/testkit";

const PASSWORD = "correct horse battery staple";
/** The sign-in form's CSRF token: any token of the right shape, sent as its cookie and its field. */
const CSRF = "c".repeat(43);

/** Sends fn(i) for i < n all at once; counts their statuses. */
async function burst(n: number, fn: (i: number) => Promise<Response>) {
  const statuses = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await fn(i);
      await res.arrayBuffer();
      return res.status;
    }),
  );
  return { count: (status: number) => statuses.filter((s) => s === status).length };
}

describe("per-address limits under attack", () => {
  let stack: Stack;
  let api: string;
  beforeAll(async () => {
    stack = await startStack({ env: { TRUST_PROXY: "127.0.0.1" } });
    api = stack.apiUrls[0]!;
    await stack.org("acme", "free");
    const made = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", "acme", "ann@acme.example"],
      { DATA_DIR: stack.dataDir, LIMITER_URL: stack.limiterUrl },
      `${PASSWORD}\n`,
    );
    expect(made.code).toBe(0);
  });
  afterAll(() => stack?.stop());

  const signIn = (from: string, email: string, password: string) =>
    fetch(`${api}/console/sign-in`, {
      method: "POST",
      redirect: "manual",
      headers: {
        "X-Forwarded-For": from,
        Cookie: `mc_signin=${CSRF}`,
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ csrf: CSRF, email, password }),
    });

  test("300 wrong sign-ins sent at once for one account from one address: at most 10 are checked, and the owner still signs in from elsewhere", async () => {
    const attacker = "198.51.100.66";
    const b = await burst(300, () => signIn(attacker, "ann@acme.example", "wrong password, again"));
    // Every attempt answered: checked (401) or refused before its hash (429); none got through.
    expect(b.count(401) + b.count(429)).toBe(300);
    expect(b.count(401)).toBeLessThanOrEqual(10);
    expect(b.count(401)).toBeGreaterThan(0);
    // Even the right password is refused from that address now...
    expect((await signIn(attacker, "ann@acme.example", PASSWORD)).status).toBe(429);
    // ...and only there: the account's owner, elsewhere, is not locked out.
    const owner = await signIn("192.0.2.10", "ann@acme.example", PASSWORD);
    expect([owner.status, owner.headers.get("location")]).toEqual([303, "/console/tokens"]);
  });

  test("300 wrong sign-ins sent at once for many accounts from one IPv6 /64: at most 20 are checked", async () => {
    const b = await burst(300, (i) => signIn(`2001:db8:66:1::${(i + 1).toString(16)}`, `guess${i}@acme.example`, "x"));
    expect(b.count(401) + b.count(429)).toBe(300);
    expect(b.count(401)).toBeLessThanOrEqual(20);
    expect(b.count(401)).toBeGreaterThan(0);
    // Another /64 has limits of its own.
    expect((await signIn("2001:db8:66:2::1", "nobody@acme.example", "x")).status).toBe(401);
  });
});
