// The admin CLI as scripts use it: its exact interface, stdout, and exit codes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { freePort, type Proc, runBun, runToEnd, tempDir, waitFor } from "../testkit/testkit";

let limiterd: Proc;
let env: Record<string, string>;
const admin = (...args: string[]) => runToEnd("cmd/admin/index.ts", args, env);

beforeAll(async () => {
  const port = await freePort();
  env = { DATA_DIR: tempDir(), LIMITER_PORT: String(port), LIMITER_URL: `http://127.0.0.1:${port}` };
  limiterd = runBun("cmd/limiterd/index.ts", [], env);
  await waitFor("limiterd", async () => (await admin("org", "create", "acme", "--plan", "free")).code === 0);
});
afterAll(async () => {
  await limiterd?.stop("SIGKILL");
});

describe("cmd/admin", () => {
  test("org, token and domain commands", async () => {
    const token = await admin("token", "create", "acme");
    expect(token.code).toBe(0);
    expect(token.stdout).toMatch(/^mc_[A-Za-z0-9_-]{43}\n$/);
    const domain = await admin("domain", "add", "acme", "Mail.Acme.COM", "--verified");
    expect(domain.stdout).toContain("domains=mail.acme.com (verified)");
    expect((await admin("domain", "add", "acme", "news.acme.com")).stdout).toContain("news.acme.com (unverified)");
    expect((await admin("org", "set-plan", "acme", "enterprise")).stdout).toContain("plan=enterprise");
    expect((await admin("org", "show", "acme")).stdout).toMatch(
      /^acme id=org_[0-9a-f]{16} plan=enterprise domains=mail\.acme\.com \(verified\), news\.acme\.com \(unverified\)\n$/,
    );
    expect((await admin("token", "revoke", token.stdout.trim())).stdout).toBe("revoked\n");
    // Revoking again changes nothing and succeeds (a revocation can always be repeated).
    expect((await admin("token", "revoke", token.stdout.trim())).stdout).toBe("revoked\n");
    const unknown = await admin("token", "revoke", `mc_${"A".repeat(43)}`);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("NotFound");
    const named = await admin("token", "create", "acme", "--name", "ci deploys");
    expect(named.code).toBe(0);
    expect((await admin("token", "create", "acme", "--name", "x".repeat(101))).code).toBe(1);
  });

  test("user create reads the password from stdin and refuses an empty, short or taken one", async () => {
    const made = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", "acme", "Ann@Acme.example"],
      env,
      "correct horse battery staple\n",
    );
    expect(made.code).toBe(0);
    expect(made.stdout).toMatch(/^created console user Ann@Acme\.example \(usr_[0-9a-f]{16}\) in acme\n$/);
    const again = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", "acme", "ann@acme.example"],
      env,
      "another long password",
    );
    expect([again.code, again.stderr]).toEqual([1, expect.stringContaining("already exists")]);
    const empty = await runToEnd("cmd/admin/index.ts", ["user", "create", "acme", "bob@acme.example"], env, "\n");
    expect([empty.code, empty.stderr]).toEqual([2, expect.stringContaining("give the new user's password on stdin")]);
    const short = await runToEnd("cmd/admin/index.ts", ["user", "create", "acme", "bob@acme.example"], env, "short\n");
    expect([short.code, short.stderr]).toEqual([1, expect.stringContaining("a password is 12 to 1024 characters")]);
    const noOrg = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", "nobody", "bob@acme.example"],
      env,
      "correct horse battery staple",
    );
    expect([noOrg.code, noOrg.stderr]).toEqual([1, expect.stringContaining("no organization nobody")]);
    const badEmail = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", "acme", "bob"],
      env,
      "correct horse battery staple",
    );
    expect([badEmail.code, badEmail.stderr]).toEqual([1, expect.stringContaining("not an email address")]);
  });

  test.each([
    [["org", "create", "acme", "--plan", "free"], 1, "already exists"],
    [["org", "create", "Bad_Slug", "--plan", "free"], 1, "slug must be"],
    [["org", "create", "x", "--plan", "gold"], 2, "plan must be free, premium or enterprise"],
    [["org", "create", "x"], 2, "plan must be"],
    [["org", "set-plan", "nobody", "free"], 1, "no organization nobody"],
    [["token", "create"], 2, "takes 1 argument"],
    [["token", "revoke", "garbage"], 1, "not a token"],
    [["domain", "add", "acme", "not a domain"], 1, "not a domain name"],
    [["domain", "add", "acme", "x.com", "--verifed"], 2, "unknown option --verifed"],
    [["frobnicate"], 2, "unknown command"],
    [[], 2, "no command given"],
  ])("%p exits %d", async (args, code, message) => {
    const r = await admin(...(args as string[]));
    expect(r.code).toBe(code as number);
    expect(r.stderr).toContain(message as string);
    expect(r.stdout).toBe("");
  });

  test("an unreachable daemon is one clear line and exit 1", async () => {
    const port = await freePort();
    const r = await runToEnd("cmd/admin/index.ts", ["org", "show", "acme"], {
      LIMITER_URL: `http://127.0.0.1:${port}`,
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(
      new RegExp(`^limiterd at http://127.0.0.1:${port} is unavailable: .*ECONNREFUSED.*$`),
    );
  });
});
