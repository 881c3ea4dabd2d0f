// The admin CLI as scripts use it: its exact interface, stdout, and exit codes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { DirectoryService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { daemonConnection } from "../limiterclient/client";
import { clientCredential } from "../plane/secret";
import { freePort, type Proc, REPO_ROOT, runBun, runToEnd, tempDir, waitFor } from "../testkit/testkit";

let limiterd: Proc;
let env: Record<string, string>;
const admin = (...args: string[]) => runToEnd("cmd/admin/index.ts", args, env);
/** The one JSON object a --json command printed. */
const parsed = (r: { code: number; stdout: string; stderr: string }) => {
  expect([r.code, r.stderr]).toEqual([0, ""]);
  return JSON.parse(r.stdout);
};
/** The organization a token admits for, as the fronts ask the daemon; "" when it admits none. */
const tokenOwner = async (token: string) => {
  const directory = daemonConnection(env.LIMITER_URL!, clientCredential(undefined, env.DATA_DIR!)).client(
    DirectoryService,
  );
  const res = await directory.verifyToken({ token });
  return res.valid ? res.orgSlug : "";
};
const ORG_ID = expect.stringMatching(/^org_[0-9a-f]{16}$/);
const TOKEN = expect.stringMatching(/^mc_[A-Za-z0-9_-]{43}$/);
const TOKEN_ID = expect.stringMatching(/^tok_[0-9a-f]{16}$/);

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
    // Bulk sends paused for complaints are resumed by the operator (none are paused here).
    expect((await admin("org", "resume-bulk", "acme")).stdout).toBe("the bulk sends of acme were not paused\n");
    expect(JSON.parse((await admin("org", "resume-bulk", "acme", "--json")).stdout)).toEqual({
      slug: "acme",
      resumed: false,
    });
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
    [["org", "resume-bulk", "nobody"], 1, "no organization nobody"],
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
      // A DATA_DIR with a plane secret: the daemon is what is missing.
      DATA_DIR: env.DATA_DIR!,
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(
      new RegExp(`^limiterd at http://127.0.0.1:${port} is unavailable: .*ECONNREFUSED.*$`),
    );
  });

  test("--json prints one object per result", async () => {
    const made = parsed(
      await admin(
        "org",
        "create",
        "json-co",
        "--plan",
        "premium",
        "--domain",
        "Mail.Json.example",
        "--verified",
        "--token",
        "--name",
        "ci",
        "--json",
      ),
    );
    expect(made).toEqual({
      id: ORG_ID,
      slug: "json-co",
      plan: "premium",
      domains: [{ name: "mail.json.example", verified: true }],
      token: TOKEN,
      tokenId: TOKEN_ID,
    });
    // The token it printed admits at once: the organization, its domain and its token were made together.
    expect(await tokenOwner(made.token)).toBe("json-co");
    const org = { id: made.id, slug: "json-co" };
    expect(parsed(await admin("org", "show", "json-co", "--json"))).toEqual({
      ...org,
      plan: "premium",
      domains: made.domains,
    });
    expect(parsed(await admin("org", "set-plan", "json-co", "free", "--json"))).toMatchObject({ ...org, plan: "free" });
    expect(parsed(await admin("domain", "add", "json-co", "news.json.example", "--json")).domains).toEqual([
      { name: "mail.json.example", verified: true },
      { name: "news.json.example", verified: false },
    ]);
    const token = parsed(await admin("token", "create", "json-co", "--json"));
    expect(token).toEqual({ slug: "json-co", token: TOKEN, tokenId: TOKEN_ID });
    expect(parsed(await admin("token", "revoke", token.token, "--json"))).toEqual({ revoked: true });
    const user = await runToEnd(
      "cmd/admin/index.ts",
      ["user", "create", "json-co", "json@json.example", "--json"],
      env,
      "correct horse battery staple\n",
    );
    expect(parsed(user)).toEqual({
      slug: "json-co",
      email: "json@json.example",
      userId: expect.stringMatching(/^usr_/),
    });
    const lanes = await admin("lanes", "--json");
    expect(lanes.code).toBe(0);
    const rows = lanes.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => r.lane)).toContain("transactional");
    expect(rows[0]).toEqual({
      lane: expect.any(String),
      depth: 0,
      ready: 0,
      inFlight: 0,
      deferred: 0,
      oldestAgeMs: 0,
      rate: expect.any(Number),
      releasedPerSecond: 0,
    });
    expect(parsed(await admin("migrate", "--json"))).toEqual({ applied: [], version: expect.any(Number) });
    // Without --token there is no token in the answer; the text form prints the token on a line of its own.
    expect(parsed(await admin("org", "create", "json-bare", "--plan", "free", "--json"))).not.toHaveProperty("token");
    const text = await admin("org", "create", "text-co", "--plan", "free", "--token");
    expect(text.stdout).toMatch(/^created text-co id=org_[0-9a-f]{16} plan=free domains=none\nmc_[A-Za-z0-9_-]{43}\n$/);
  });

  test.each([
    [["org", "create", "acme", "--plan", "free", "--json"], 1, "already_exists", "organization acme already exists"],
    [["org", "show", "nobody", "--json"], 1, "not_found", "no organization nobody"],
    [["org", "create", "x", "--plan", "gold", "--json"], 2, "usage", "plan must be free, premium or enterprise"],
    [["org", "create", "x", "--plan", "free", "--verified", "--json"], 2, "usage", "--verified goes with --domain"],
    [["org", "create", "x", "--plan", "free", "--name", "n", "--json"], 2, "usage", "--name goes with --token"],
    [["org", "create", "x", "--plan", "free", "--domain", "no", "--json"], 1, "invalid_argument", "not a domain name"],
    [["frobnicate", "--json"], 2, "usage", "unknown command: frobnicate"],
  ])("%p fails as JSON with exit %d", async (args, code, kind, message) => {
    const r = await admin(...(args as string[]));
    expect(r.code).toBe(code as number);
    expect(r.stdout).toBe("");
    expect(JSON.parse(r.stderr)).toEqual({
      error: { code: kind, message: expect.stringContaining(message as string) },
    });
  });

  test("an unreachable daemon fails as JSON with exit 1", async () => {
    const port = await freePort();
    const r = await runToEnd("cmd/admin/index.ts", ["org", "show", "acme", "--json"], {
      LIMITER_URL: `http://127.0.0.1:${port}`,
      // A DATA_DIR with a plane secret: the daemon is what is missing.
      DATA_DIR: env.DATA_DIR!,
    });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr).error).toEqual({
      code: "unavailable",
      message: expect.stringMatching(
        new RegExp(`^limiterd at http://127.0.0.1:${port} is unavailable: .*ECONNREFUSED`),
      ),
    });
  });

  test("a configuration error is one line and exit 2, as JSON with --json", async () => {
    const badEnv = { LIMITER_URL: "https://127.0.0.1:7070" };
    const text = await runToEnd("cmd/admin/index.ts", ["org", "show", "acme"], badEnv);
    expect([text.code, text.stdout, text.stderr]).toEqual([
      2,
      "",
      expect.stringMatching(/^admin: configuration error: LIMITER_URL=https:\/\/ needs LIMITER_TLS_CLIENT_CERT.*\n$/),
    ]);
    const json = await runToEnd("cmd/admin/index.ts", ["org", "show", "acme", "--json"], badEnv);
    expect([json.code, json.stdout]).toEqual([2, ""]);
    expect(JSON.parse(json.stderr)).toEqual({
      error: { code: "configuration", message: expect.stringContaining("needs LIMITER_TLS_CLIENT_CERT") },
    });
  });

  test("import creates organizations, domains, tokens and console users once, however often it runs", async () => {
    const dir = tempDir();
    const file = join(dir, "orgs.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({
          slug: "imp-a",
          plan: "premium",
          domains: [{ name: "mail.imp-a.example", verified: true }],
          token: true,
          tokenName: "ci",
          users: ["Ann@Imp-A.example"],
        }),
        "",
        JSON.stringify({ slug: "imp-b", plan: "free" }),
        JSON.stringify({ slug: "imp-pre", plan: "free", domains: [{ name: "imp-pre.example" }], token: true }),
      ].join("\n"),
    );
    expect((await admin("org", "create", "imp-pre", "--plan", "enterprise")).code).toBe(0);
    const passwords = join(dir, "passwords.tsv");
    writeFileSync(passwords, "ann@imp-a.example\tcorrect horse battery staple\n");
    const run = async () => {
      const r = await admin("import", file, "--passwords", passwords);
      expect([r.code, r.stderr]).toEqual([0, ""]);
      return r.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
    };
    const first = await run();
    expect(first).toEqual([
      {
        line: 1,
        created: true,
        id: ORG_ID,
        slug: "imp-a",
        plan: "premium",
        domains: [{ name: "mail.imp-a.example", verified: true }],
        token: TOKEN,
        tokenId: TOKEN_ID,
        users: [{ email: "Ann@Imp-A.example", created: true, userId: expect.stringMatching(/^usr_/) }],
      },
      { line: 3, created: true, id: ORG_ID, slug: "imp-b", plan: "free", domains: [] },
      // imp-pre was there before: reported as it is, unchanged (plan, domains), and no token issued.
      { line: 4, created: false, id: ORG_ID, slug: "imp-pre", plan: "enterprise", domains: [] },
    ]);
    expect(await tokenOwner(first[0].token)).toBe("imp-a");
    const again = await run();
    expect(again.map((r) => [r.slug, r.created, r.id, r.token])).toEqual(
      first.map((r) => [r.slug, false, r.id, undefined]),
    );
    expect(again[0].users).toEqual([{ email: "Ann@Imp-A.example", created: false }]);
    expect(parsed(await admin("org", "show", "imp-a", "--json")).plan).toBe("premium");
    // The import from stdin, its passwords from a file; the passwords from stdin, the import from a file.
    const fromStdin = await runToEnd(
      "cmd/admin/index.ts",
      ["import", "-", "--passwords", passwords],
      env,
      '{"slug":"imp-c","plan":"free","users":["ann@imp-a.example"]}\n',
    );
    expect([fromStdin.code, JSON.parse(fromStdin.stdout).users]).toEqual([
      0,
      [{ email: "ann@imp-a.example", created: false }],
    ]);
    writeFileSync(file, JSON.stringify({ slug: "imp-d", plan: "free", users: ["dan@imp-d.example"] }));
    const stdinPasswords = await runToEnd(
      "cmd/admin/index.ts",
      ["import", file, "--passwords", "-"],
      env,
      "dan@imp-d.example\tcorrect horse battery staple\n",
    );
    expect([stdinPasswords.code, JSON.parse(stdinPasswords.stdout).users[0].created]).toEqual([0, true]);
  });

  test.each([
    [
      '{"slug":"bad-1","plan":"free","users":["eve@bad.example"]}',
      "line 1: no password for console user eve@bad.example",
      2,
    ],
    ['{"slug":"bad-2","plan":"gold"}', "line 1: plan must be free, premium or enterprise", 2],
    ['{"slug":"bad-3","plan":"free","password":"x"}', 'line 1: unknown field "password"', 2],
    ['{"slug":"bad-4","plan":"free"}\nnot json', "line 2: not JSON", 2],
    [
      '{"slug":"bad-5","plan":"free"}\n{"slug":"Bad_5","plan":"free"}',
      "lines 1-2: organization 2 of the batch: slug must be",
      1,
    ],
  ])("import of %p fails as JSON before writing anything", async (input, message, code) => {
    const r = await runToEnd("cmd/admin/index.ts", ["import", "-", "--json"], env, input);
    expect([r.code, r.stdout]).toEqual([code, ""]);
    expect(JSON.parse(r.stderr).error.message).toContain(message);
    // No organization of the input was written, the valid ones before the fault included.
    const slugs = input.split("\n").flatMap((line) => {
      try {
        return [JSON.parse(line).slug as string];
      } catch {
        return [];
      }
    });
    expect(slugs.length).toBeGreaterThan(0);
    for (const slug of slugs) {
      const shown = await admin("org", "show", slug, "--json");
      // A slug that is not one (Bad_5) is refused as such: it cannot have been written either.
      expect([slug, shown.code, JSON.parse(shown.stderr).error.code]).toEqual([
        slug,
        1,
        expect.stringMatching(/^(not_found|invalid_argument)$/),
      ]);
    }
  });

  test("a command that calls the daemon loads neither packages nor generated code (loading them made a call cost over 0.1 s of CPU)", async () => {
    const log = join(tempDir(), "modules.txt");
    const dir = tempDir();
    const importFile = join(dir, "orgs.jsonl");
    writeFileSync(importFile, JSON.stringify({ slug: "light-imp", plan: "free", token: true }));
    const calls: [string[], string?][] = [
      [["org", "create", "light", "--plan", "free", "--domain", "light.example", "--token", "--json"]],
      [["org", "show", "light"]],
      [["org", "show", "nobody"]],
      [["org", "set-plan", "light", "premium"]],
      [["domain", "add", "light", "news.light.example", "--verified"]],
      [["token", "create", "light", "--json"]],
      [["token", "revoke", `mc_${"A".repeat(43)}`]],
      [["user", "create", "light", "light@light.example"], "correct horse battery staple\n"],
      [["lanes", "--json"]],
      [["import", importFile]],
    ];
    for (const [args, input] of calls) {
      // The process as `bun run cmd/admin` starts it, with a preload that writes down each module it loads.
      const p = Bun.spawn(
        [process.execPath, "run", "--preload", "./internal/testkit/loadlog.ts", "cmd/admin", ...args],
        {
          cwd: REPO_ROOT,
          env: { ...process.env, ...env, MODULE_LOG: log },
          stdin: input === undefined ? "ignore" : new Blob([input]),
          stdout: "pipe",
          stderr: "pipe",
        },
      );
      const [code, stderr] = await Promise.all([p.exited, new Response(p.stderr).text()]);
      const expectedCode = args.includes("nobody") || args[1] === "revoke" ? 1 : 0;
      expect([args, code, expectedCode === 0 ? stderr : ""]).toEqual([args, expectedCode, ""]);
    }
    const loaded = [...new Set(readFileSync(log, "utf8").trim().split("\n"))].map((f) => relative(REPO_ROOT, f));
    // The log works: the CLI and its caller of the daemon are in it.
    expect(loaded).toContain("cmd/admin/index.ts");
    expect(loaded).toContain("internal/limiterclient/unary.ts");
    // The Connect client, protobuf-es and the generated code (types only for the CLI) are what made a call cost 0.1 s.
    expect(
      loaded.filter((f) => f.startsWith("node_modules/") || f.startsWith("internal/gen/") || f.startsWith("..")),
    ).toEqual([]);
  });
});
