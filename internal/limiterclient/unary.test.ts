// The JSON caller against the real daemon, in cleartext (with the plane secret) and on mutual
// TLS: answers in the JSON form, the daemon's refusals with their codes, an unreachable or
// refusing daemon as unavailable, a call without the plane secret as unauthenticated, and the
// admin CLI's exit codes for them.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:http2";
import { join } from "node:path";
import type { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import type { DirectoryService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { issueCert, newCa, initCerts } from "../plane/certs";
import { type ClientCredential, clientCredential, ensurePlaneSecret, PLANE_SECRET_FILE } from "../plane/secret";
import type { ClientTls, Role } from "../plane/tls";
import {
  clientTlsEnv,
  daemonTlsEnv,
  freePort,
  type Proc,
  runBun,
  runToEnd,
  tempDir,
  waitFor,
} from "../testkit/testkit";
import { RpcError } from "./rpcerror";
import { unarySession } from "./unary";

const DIRECTORY = "mailcore.limiter.v1.DirectoryService";
let certs: string;
const daemons: Proc[] = [];
let cleartextUrl: string;
let tlsUrl: string;
/** The cleartext daemon's DATA_DIR, where it keeps the plane secret. */
const clearDataDir = tempDir();
const clear = clientCredential(undefined, clearDataDir);

const roleTls = (role: Role): ClientTls => ({
  ca: readFileSync(join(certs, "ca.pem")),
  cert: readFileSync(join(certs, `${role}.pem`)),
  key: readFileSync(join(certs, `${role}.key`)),
});
const asRole = (role: Role): ClientCredential => ({ tls: roleTls(role) });
const directory = (url: string, cred: ClientCredential) =>
  unarySession(url, cred).client<typeof DirectoryService>(DIRECTORY);
/** The RpcError a call failed with (its code and message); fails the test when it succeeded. */
const refusal = async (call: Promise<unknown>) => {
  const err = await call.then(
    () => new Error("the call succeeded"),
    (e: unknown) => e,
  );
  if (!(err instanceof RpcError)) throw err;
  return { code: err.code, message: err.message };
};

async function startDaemon(tls: boolean): Promise<string> {
  const port = await freePort();
  const url = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  daemons.push(
    runBun("cmd/limiterd/index.ts", [], {
      DATA_DIR: tls ? tempDir() : clearDataDir,
      LIMITER_PORT: String(port),
      ...(tls ? daemonTlsEnv(certs) : {}),
    }),
  );
  // Ready when it answers a call (a refusal is an answer; an unreachable daemon is unavailable),
  // after it made the plane secret its clients read.
  if (!tls) await waitFor("the plane secret", async () => existsSync(join(clearDataDir, PLANE_SECRET_FILE)));
  await waitFor(`limiterd at ${url}`, async () => {
    const r = await directory(url, tls ? asRole("admin") : clear)
      .getOrganization({ slug: "ready" })
      .catch((e: RpcError) => e);
    return !(r instanceof RpcError && r.code === "unavailable");
  });
  return url;
}

beforeAll(async () => {
  certs = tempDir();
  await initCerts(certs, []);
  [cleartextUrl, tlsUrl] = await Promise.all([startDaemon(false), startDaemon(true)]);
});
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop("SIGKILL")));
});

describe("unarySession", () => {
  for (const mode of ["cleartext", "mutual TLS"] as const) {
    test(`${mode}: answers in the JSON form, and the daemon's refusals with their codes`, async () => {
      const [url, cred] = mode === "cleartext" ? [cleartextUrl, clear] : [tlsUrl, asRole("admin")];
      const session = unarySession(url, cred);
      const dir = session.client<typeof DirectoryService>(DIRECTORY);
      const slug = mode === "cleartext" ? "json-clear" : "json-tls";
      const made = await dir.createOrganization({
        slug,
        plan: "PLAN_PREMIUM",
        domains: [{ name: "Mail.Example.COM", verified: true }],
        withToken: true,
      });
      expect(made).toEqual({
        organization: {
          id: expect.stringMatching(/^org_[0-9a-f]{16}$/),
          slug,
          plan: "PLAN_PREMIUM",
          domains: [{ name: "mail.example.com", verified: true }],
        },
        token: expect.stringMatching(/^mc_/),
        tokenId: expect.stringMatching(/^tok_/),
      });
      // The JSON form leaves out false and empty values: an unverified domain has no "verified".
      const added = await dir.addDomain({ slug, domain: "news.example.com" });
      expect(added.organization?.domains).toEqual([
        { name: "mail.example.com", verified: true },
        { name: "news.example.com" },
      ]);
      // Many organizations in one call: a body of many HTTP/2 frames each way.
      const organizations = Array.from({ length: 300 }, (_, i) => ({
        slug: `${slug}-${i}`,
        plan: "PLAN_FREE" as const,
        domains: [{ name: `mail.${slug}-${i}.example`, verified: true }],
        withToken: true,
      }));
      const { results = [] } = await dir.provisionOrganizations({ organizations });
      expect(results.map((r) => [r.organization?.slug, r.created, r.token?.slice(0, 3)])).toEqual(
        organizations.map((o) => [o.slug, true, "mc_"]),
      );

      expect(await refusal(dir.createOrganization({ slug, plan: "PLAN_FREE" }))).toEqual({
        code: "already_exists",
        message: `organization ${slug} already exists`,
      });
      expect(await refusal(dir.getOrganization({ slug: "nobody" }))).toEqual({
        code: "not_found",
        message: "no organization nobody",
      });
      expect((await refusal(dir.createOrganization({ slug: "Bad_Slug", plan: "PLAN_FREE" }))).code).toBe(
        "invalid_argument",
      );
      expect(
        (await refusal(session.client<typeof ConsoleService>("mailcore.limiter.v1.ConsoleService").createUser({})))
          .code,
      ).toBe("invalid_argument");
      // A method the daemon does not serve is a 404 without a Connect error: unimplemented.
      const unknown = session.client<typeof DirectoryService>("mailcore.limiter.v1.NoSuchService");
      expect((await refusal(unknown.getOrganization({ slug }))).code).toBe("unimplemented");
      session.close();
    }, 30_000);
  }

  test("a certificate without the RPC's role is permission_denied; the admin CLI exits 1 with that code", async () => {
    expect((await refusal(directory(tlsUrl, asRole("front")).getOrganization({ slug: "x" }))).code).toBe(
      "permission_denied",
    );
    const r = await runToEnd("cmd/admin/index.ts", ["org", "show", "json-tls", "--json"], {
      LIMITER_URL: tlsUrl,
      ...clientTlsEnv(certs, "front"),
    });
    expect([r.code, r.stdout, JSON.parse(r.stderr).error.code]).toEqual([1, "", "permission_denied"]);
    const ok = await runToEnd("cmd/admin/index.ts", ["org", "show", "json-tls", "--json"], {
      LIMITER_URL: tlsUrl,
      ...clientTlsEnv(certs, "admin"),
    });
    expect([ok.code, ok.stderr, JSON.parse(ok.stdout).slug]).toEqual([0, "", "json-tls"]);
  }, 30_000);

  test("an unreachable daemon, and one that refuses the certificate at the handshake, are unavailable", async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const refused = await refusal(directory(closed, clear).getOrganization({ slug: "x" }));
    expect(refused).toEqual({ code: "unavailable", message: expect.stringContaining("ECONNREFUSED") });
    const stranger = await issueCert(await newCa("another CA"), { name: "stranger", roles: ["admin"] });
    const tls = { ca: roleTls("admin").ca, cert: Buffer.from(stranger.cert), key: Buffer.from(stranger.key) };
    expect((await refusal(directory(tlsUrl, { tls }).getOrganization({ slug: "x" }))).code).toBe("unavailable");
    // Cleartext to the TLS port: the daemon reads the preface as a broken handshake and closes.
    expect(
      (await refusal(directory(tlsUrl.replace("https:", "http:"), clear).getOrganization({ slug: "x" }))).code,
    ).toBe("unavailable");
  }, 30_000);

  test("cleartext: the plane secret is made 0600, and a call without it or with another is unauthenticated", async () => {
    const file = join(clearDataDir, PLANE_SECRET_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const unauthenticated = {
      code: "unauthenticated" as const,
      message: "this port takes calls with the plane secret only (DATA_DIR/plane.secret, sent as a bearer token)",
    };
    // Another secret: another DATA_DIR's.
    const other = tempDir();
    ensurePlaneSecret(other);
    expect(
      await refusal(directory(cleartextUrl, clientCredential(undefined, other)).getOrganization({ slug: "x" })),
    ).toEqual(unauthenticated);
    // No secret at all: a hand-made HTTP/2 call without the header.
    const h2 = connect(cleartextUrl);
    const status = await new Promise<number>((done, fail) => {
      const stream = h2.request({
        ":method": "POST",
        ":path": `/${DIRECTORY}/GetOrganization`,
        "content-type": "application/json",
        "connect-protocol-version": "1",
      });
      stream.on("response", (h) => done(Number(h[":status"])));
      stream.on("error", fail);
      stream.end("{}");
    });
    h2.close();
    expect(status).toBe(401);
    // A client whose secret file is not there fails the call itself, unauthenticated.
    const without = unarySession(cleartextUrl, clientCredential(undefined, tempDir()));
    expect(
      await refusal(without.client<typeof DirectoryService>(DIRECTORY).getOrganization({ slug: "x" })),
    ).toMatchObject({ code: "unauthenticated", message: expect.stringContaining("is not there yet") });
    // The admin CLI reads the secret in its DATA_DIR: with another one it exits 1, unauthenticated.
    const cli = (dataDir: string) =>
      runToEnd("cmd/admin/index.ts", ["org", "show", "json-clear", "--json"], {
        LIMITER_URL: cleartextUrl,
        DATA_DIR: dataDir,
      });
    const stranger = await cli(other);
    expect([stranger.code, JSON.parse(stranger.stderr).error.code]).toEqual([1, "unauthenticated"]);
    const own = await cli(clearDataDir);
    expect([own.code, JSON.parse(own.stdout).slug]).toEqual([0, "json-clear"]);
    // A secret file that others may read is refused, not used.
    const loose = tempDir();
    writeFileSync(join(loose, PLANE_SECRET_FILE), readFileSync(file), { mode: 0o644 });
    expect(
      (await refusal(directory(cleartextUrl, clientCredential(undefined, loose)).getOrganization({ slug: "x" })))
        .message,
    ).toContain("may be read by others than its owner (mode 0644): chmod 600 it");
  }, 30_000);
});
