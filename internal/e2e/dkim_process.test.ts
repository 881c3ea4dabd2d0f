// test-runner: alone
// Signed mail end to end, through limiterd, an API process, an SMTP front and a worker with the
// file sink, against a dnsmasq of the test's own: the DKIM record the API shows, published as
// DNS carries it (two strings), verifies the signature of every kind of message (an API send,
// an SMTP submission, a campaign, a workflow's email step) with Debian's python3-dkim, which nobody on the project wrote;
// the envelope sender is the return path, whose HMAC the master key checks. Then the domain's
// records verified and a DNS timeout that changes nothing; a rotation without a gap; and a
// start under another master key, refused.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MASTER_KEY_FILE, readMasterKeyFile } from "../dkim/seal";
import { parseReturnPath } from "../returnpath/returnpath";
import { dkimpy } from "../testkit/dkimverifiers";
import { type DnsRecord, type Dnsmasq, type ShownRecord, startDnsmasq, tableOf } from "../testkit/dnsmasq";
import { viaNodemailer } from "../testkit/smtpclients";
import { startReceiver } from "../testkit/receiver";
import { freePort, runToEnd, type SmtpProc, type Stack, startSmtp, startStack, waitFor } from "../testkit/testkit";

const DOMAIN = "signed.example";
const INBOUND = "mx.mail.test";
const SPF_INCLUDE = "_spf.mail.test";

let dns: Dnsmasq;
let stack: Stack;
let smtp: SmtpProc;
let token: string;
let metricsPort: number;

type Json = Record<string, any>;

async function api(
  method: string,
  path: string,
  body?: unknown,
  as: string = token,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${as}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Json) };
}

const sinkDir = () => join(stack.dataDir, "sink");

async function eml(id: string): Promise<Buffer> {
  const file = join(sinkDir(), `${id}.eml`);
  await waitFor(`${id} in the sink`, async () => existsSync(file), 20_000);
  return readFileSync(file);
}

/** What a message's Return-Path field holds; the rest of the file is the message as signed. */
function returnPathOf(message: Buffer): string {
  const first = message.toString("latin1").split("\r\n")[0]!;
  expect(first).toMatch(/^Return-Path: <[^>]+>$/);
  return first.slice("Return-Path: <".length, -1);
}

/** The DNS table that publishes the records the API shows (each TXT value as DNS carries it), and more. */
function published(domain: Json, extra: DnsRecord[] = []): DnsRecord[] {
  const shown = domain.records.filter(
    (r: Json) => r.purpose !== "dkim" || !String(r.reason ?? "").startsWith("retired"),
  ) as ShownRecord[];
  return [...tableOf(shown), ...extra];
}

async function theDomain(): Promise<Json> {
  const list = await api("GET", "/api/v1/domains");
  expect(list.status).toBe(200);
  const domain = list.body.data.find((d: Json) => d.name === DOMAIN);
  expect(domain).toBeDefined();
  return domain;
}

async function send(subject: string): Promise<Buffer> {
  const sent = await api("POST", "/api/v1/emails", {
    from: `Jane <jane@${DOMAIN}>`,
    to: "bob@receiver.test",
    subject,
    text: "Hello.\n",
    html: "<p>Hello.</p>",
  });
  expect(sent.status).toBe(202);
  return eml(sent.body.id);
}

/** The signatures of each message as python3-dkim reads them: [selector, algorithm, result, detail]. */
async function verify(messages: Buffer[]): Promise<string[][][]> {
  return (await dkimpy(messages, dns.address)).map((sigs) =>
    sigs.map((s) => [s.selector, s.algorithm, s.result, s.detail]),
  );
}

beforeAll(async () => {
  dns = await startDnsmasq([]);
  metricsPort = await freePort();
  stack = await startStack({
    workers: 1,
    env: {
      DNS_SERVER: dns.address,
      DKIM_ED25519: "1",
      INBOUND_MX_HOST: INBOUND,
      SPF_INCLUDE,
      TRUST_PROXY: "127.0.0.1",
      DOMAIN_RECHECK_S: "10",
      WEBHOOK_ALLOW_PRIVATE_URLS: "1",
      LIMITER_METRICS_PORT: String(metricsPort),
    },
  });
  // The organization with signed.example, which the admin's `domain add` made with its keys.
  token = await stack.org("signed", "enterprise");
  smtp = await startSmtp(stack);
}, 90_000);
afterAll(async () => {
  await smtp?.proc.stop("SIGKILL");
  await stack?.stop();
  await dns?.stop();
});

test("an API send, an SMTP submission, a campaign message and a workflow's email each verify with python3-dkim against the records the API shows; the envelope sender is the return path", async () => {
  const domain = await theDomain();
  const dkim = domain.records.filter((r: Json) => r.purpose === "dkim");
  expect(dkim.map((r: Json) => r.value.slice(0, 15))).toEqual(["v=DKIM1; k=rsa;", "v=DKIM1; k=ed25"]);
  expect(JSON.stringify(domain)).not.toMatch(/PRIVATE|dkimseal/);
  await dns.setRecords(published(domain));

  const viaApi = await send("via the API");
  const viaSmtp = await (async () => {
    const o = await viaNodemailer({
      port: smtp.port,
      user: "signed",
      pass: token,
      mailFrom: `jane@${DOMAIN}`,
      to: ["carol@receiver.test"],
      from: `Jane <jane@${DOMAIN}>`,
      subject: "via SMTP",
      text: "Hello over SMTP.",
    });
    expect(o.failure, o.transcript).toBeUndefined();
    return eml(o.queued!.id!);
  })();
  /** The message in the sink whose Subject is this. */
  const bySubject = async (subject: string) => {
    let found: Buffer | undefined;
    await waitFor(
      `"${subject}" in the sink`,
      async () => {
        for (const f of readdirSync(sinkDir())) {
          const b = readFileSync(join(sinkDir(), f));
          if (b.toString("latin1").includes(`\r\nSubject: ${subject}\r\n`)) found = b;
        }
        return found !== undefined;
      },
      30_000,
    );
    return found!;
  };
  // A workflow that greets each new subscriber: its email step is a message too.
  const workflow = await api("POST", "/api/v1/workflows", {
    name: "welcome",
    trigger: { type: "subscriber.created" },
    steps: [{ type: "email", from: `Hello <hello@${DOMAIN}>`, subject: "via a workflow", text: "Welcome." }],
    active: true,
  });
  expect(workflow.status).toBe(201);
  const viaCampaign = await (async () => {
    expect((await api("POST", "/api/v1/subscribers", { email: "dave@receiver.test" })).status).toBeLessThan(300);
    const made = await api("POST", "/api/v1/campaigns", {
      name: "News",
      from: `News <news@${DOMAIN}>`,
      subject: "via a campaign",
      markdown: "News. [Unsubscribe]({{unsubscribeUrl}})",
      audience: { all: true },
    });
    expect(made.status).toBe(201);
    expect((await api("POST", `/api/v1/campaigns/${made.body.id}/send`)).status).toBe(202);
    return bySubject("via a campaign");
  })();
  const viaWorkflow = await bySubject("via a workflow");

  const all = [viaApi, viaSmtp, viaCampaign, viaWorkflow];
  const results = await verify(all);
  const [rsa, ed] = dkim.map((r: Json) => r.name.split(".")[0]);
  for (const sigs of results)
    expect(sigs).toEqual([
      [rsa, "rsa-sha256", "pass", ""],
      [ed, "ed25519-sha256", "pass", ""],
    ]);
  // The campaign's one-click unsubscribe is covered by the signature (RFC 8058 section 4).
  const [campaignSig] = await dkimpy([viaCampaign], dns.address);
  expect(campaignSig![0]!.headers).toEqual(expect.arrayContaining(["list-unsubscribe", "list-unsubscribe-post"]));

  // The envelope sender: at bounces.<domain>, naming the message, its HMAC under the master key.
  const key = readMasterKeyFile(join(stack.dataDir, MASTER_KEY_FILE)).derive("return-path");
  for (const m of all) {
    const rp = returnPathOf(m);
    expect(rp).toEndWith(`@bounces.${DOMAIN}`);
    const parsed = parseReturnPath(rp, key);
    expect(parsed).toMatchObject({ ok: true, domain: `bounces.${DOMAIN}` });
  }
  expect(parseReturnPath(returnPathOf(viaApi), key)).toMatchObject({
    messageId: (/^Message-ID: <([^@]+)@/im.exec(viaApi.toString("latin1")) ?? [])[1],
  });
}, 120_000);

test("bad input: not a domain 422, an IDN kept as punycode, a name taken 409, another organization's verified domain 409, an unknown id 404", async () => {
  const notADomain = await api("POST", "/api/v1/domains", { name: "not a domain" });
  expect(notADomain.status).toBe(422);
  expect(notADomain.body.field).toBe("name");
  expect((await api("POST", "/api/v1/domains", { domain: "x.example" })).status).toBe(422);
  const idn = await api("POST", "/api/v1/domains", { name: "Bücher.example" });
  expect(idn.status).toBe(201);
  expect(idn.body).toMatchObject({ name: "xn--bcher-kva.example", status: "pending", checkedAt: null });
  expect(idn.body.records.find((r: Json) => r.purpose === "dkim").name).toEndWith("._domainkey.xn--bcher-kva.example");
  expect((await api("POST", "/api/v1/domains", { name: "xn--bcher-kva.example" })).body.code).toBe("DOMAIN_TAKEN");
  // signed.example is verified by this organization: another one cannot add it.
  const other = await stack.org("other", "enterprise");
  const taken = await api("POST", "/api/v1/domains", { name: DOMAIN }, other);
  expect(taken.status).toBe(409);
  expect(taken.body.message).toContain("verified by another organization");
  expect((await api("GET", `/api/v1/domains/${idn.body.id}`, undefined, other)).status).toBe(404);
  expect((await api("GET", "/api/v1/domains/dom_000000000000000000000000")).status).toBe(404);
  expect((await api("GET", "/api/v1/domains/not-an-id")).status).toBe(422);
  expect((await api("DELETE", `/api/v1/domains/${idn.body.id}`)).status).toBe(204);
  expect((await api("GET", `/api/v1/domains/${idn.body.id}`)).status).toBe(404);
  const everything = JSON.stringify((await api("GET", "/api/v1/domains")).body);
  expect(everything).not.toMatch(/dkimseal|PRIVATE|MIIE[uvw]/);
}, 60_000);

test("keys are made with an organization the operator creates; a batch's (import) at their first message, which is signed", async () => {
  const created = await stack.admin(
    "org",
    "create",
    "made",
    "--plan",
    "free",
    "--domain",
    "made.example",
    "--verified",
    "--token",
    "--json",
  );
  expect([created.code, created.stderr]).toEqual([0, ""]);
  const madeToken = JSON.parse(created.stdout).token as string;
  const made = (await api("GET", "/api/v1/domains", undefined, madeToken)).body.data[0];
  expect(made.records.filter((r: Json) => r.purpose === "dkim")).toHaveLength(2);

  const file = join(stack.dataDir, "import.jsonl");
  writeFileSync(
    file,
    `${JSON.stringify({ slug: "batch", plan: "free", domains: [{ name: "batch.example", verified: true }], token: true })}\n`,
  );
  const imported = await stack.admin("import", file, "--json");
  expect(imported.code).toBe(0);
  const batchToken = JSON.parse(imported.stdout.trim().split("\n")[0]!).token as string;
  const dkimOf = async () =>
    (await api("GET", "/api/v1/domains", undefined, batchToken)).body.data[0].records.filter(
      (r: Json) => r.purpose === "dkim",
    );
  expect(await dkimOf()).toEqual([]);
  const sent = await api(
    "POST",
    "/api/v1/emails",
    { from: "hi@batch.example", to: "erin@receiver.test", subject: "first", text: "First." },
    batchToken,
  );
  expect(sent.status).toBe(202);
  const message = await eml(sent.body.id);
  const keys = await dkimOf();
  expect(keys).toHaveLength(2);
  await dns.setRecords(tableOf(keys));
  expect((await verify([message]))[0]!.map((sig) => sig[2])).toEqual(["pass", "pass"]);
  // The next tests publish tables of their own: the domain goes, so that the recheck never finds
  // its records gone (the alert's gauge, which the recheck test reads, counts every domain).
  const [batchDomain] = (await api("GET", "/api/v1/domains", undefined, batchToken)).body.data;
  expect(batchDomain.name).toBe("batch.example");
  expect((await api("DELETE", `/api/v1/domains/${batchDomain.id}`, undefined, batchToken)).status).toBe(204);
}, 60_000);

test("verify: every record verified once published; a DNS server that times out changes nothing, and the answer says so", async () => {
  const domain = await theDomain();
  // The domain's own DMARC policy instead of the advice.
  const own: DnsRecord = { type: "TXT", name: `_dmarc.${DOMAIN}`, strings: ["v=DMARC1; p=reject"] };
  await dns.setRecords([...published(domain).filter((r) => r.name !== own.name), own]);
  const checked = await api("POST", `/api/v1/domains/${domain.id}/verify`);
  expect(checked.status).toBe(200);
  expect(checked.body.records.map((r: Json) => [r.purpose, r.status, r.reason])).toEqual([
    ["verification", "verified", null],
    ["dkim", "verified", null],
    ["dkim", "verified", null],
    ["return-path", "verified", null],
    ["spf", "verified", null],
    ["dmarc", "verified", null],
  ]);
  expect(checked.body).toMatchObject({ status: "verified", dnsAnswered: true });

  await dns.setRecords([{ type: "timeout", name: DOMAIN }]);
  const timedOut = await api("POST", `/api/v1/domains/${domain.id}/verify`);
  expect(timedOut.body).toMatchObject({ status: "verified", dnsAnswered: false });
  expect(timedOut.body.records[0].reason).toContain("the status is kept from the last check until DNS answers");
  const after = await api("GET", `/api/v1/domains/${domain.id}`);
  expect(after.body.records.every((r: Json) => r.status === "verified" && r.reason === null)).toBe(true);
  expect(after.body.checkedAt).toBe(checked.body.checkedAt);
}, 60_000);

test("rotation: the pending key's record shown; the old key signs until the new record verifies, then the new one; the old record kept for its grace period", async () => {
  const before = await theDomain();
  const oldSelectors = before.records.filter((r: Json) => r.purpose === "dkim").map((r: Json) => r.name.split(".")[0]);
  await dns.setRecords(published(before));
  const rotated = await api("POST", `/api/v1/domains/${before.id}/dkim/rotate`);
  expect(rotated.status).toBe(200);
  const dkim = rotated.body.records.filter((r: Json) => r.purpose === "dkim");
  expect(dkim).toHaveLength(4);
  const newSelectors = dkim.map((r: Json) => r.name.split(".")[0]).filter((s: string) => !oldSelectors.includes(s));
  expect(newSelectors).toHaveLength(2);
  // A second rotation while this one is pending is refused.
  expect((await api("POST", `/api/v1/domains/${before.id}/dkim/rotate`)).body.code).toBe("ROTATION_PENDING");

  // Not yet published: the old key signs, the new one does not.
  const [whilePending] = await verify([await send("while the rotation is pending")]);
  expect(whilePending!.map((s) => s[0])).toEqual(oldSelectors);
  expect(whilePending!.every((s) => s[2] === "pass")).toBe(true);
  // The check does not promote a key whose record is not there.
  expect(
    (await api("POST", `/api/v1/domains/${before.id}/verify`)).body.records
      .filter((r: Json) => r.purpose === "dkim")
      .map((r: Json) => r.status),
  ).toEqual(["verified", "verified", "pending", "pending"]);

  // Published and verified: the new key signs (the daemon's cache of keys is forgotten on promotion).
  await dns.setRecords(published(rotated.body));
  const promoted = await api("POST", `/api/v1/domains/${before.id}/verify`);
  expect(promoted.body.status).toBe("verified");
  const records = promoted.body.records.filter((r: Json) => r.purpose === "dkim");
  const retired = records.filter((r: Json) => String(r.reason).startsWith("retired"));
  expect(retired.map((r: Json) => r.name.split(".")[0]).sort()).toEqual([...oldSelectors].sort());
  expect(retired[0].reason).toContain("keep it published until");
  const [afterRotation] = await verify([await send("after the rotation")]);
  expect(afterRotation).toEqual([
    [newSelectors[0], "rsa-sha256", "pass", ""],
    [newSelectors[1], "ed25519-sha256", "pass", ""],
  ]);
}, 90_000);

test("the recheck: a DKIM record that disappears fails the domain (domain.failed, the alert's gauge) and its mail stays signed; back, domain.verified", async () => {
  const receiver = startReceiver();
  try {
    const hook = await api("POST", "/api/v1/webhooks", {
      url: `${receiver.url}/domains`,
      events: ["domain.verified", "domain.failed"],
    });
    expect(hook.status).toBe(201);
    const domain = await theDomain();
    expect(domain.status).toBe("verified");
    const live = published(domain);
    await dns.setRecords(live.filter((r) => !r.name.includes("._domainkey.")));
    const events = () => receiver.at("/domains").map((r) => JSON.parse(r.body) as Json);
    await waitFor("domain.failed", async () => events().some((e) => e.type === "domain.failed"), 60_000);
    const failed = events().find((e) => e.type === "domain.failed")!;
    expect(failed.data).toMatchObject({ id: domain.id, name: DOMAIN, status: "failed" });
    expect(failed.data.records.filter((r: Json) => r.purpose === "dkim").map((r: Json) => [r.from, r.to])).toEqual([
      ["verified", "failed"],
      ["verified", "failed"],
    ]);
    const now = await api("GET", `/api/v1/domains/${domain.id}`);
    expect(now.body.status).toBe("failed");
    expect(now.body.records.find((r: Json) => r.purpose === "dkim").reason).toContain("it was verified before");
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^mailcore_domains_dkim_failing{process="limiterd"} 1$/m);
    // Still signed (and still allowed to send): receivers find no key, nothing goes out unsigned.
    const [sigs] = await dkimpy([await send("while the record is gone")], dns.address);
    expect(sigs!.map((s) => s.result)).toEqual(["fail", "fail"]);

    await dns.setRecords(live);
    await waitFor("domain.verified", async () => events().some((e) => e.type === "domain.verified"), 60_000);
    expect((await api("GET", `/api/v1/domains/${domain.id}`)).body.status).toBe("verified");
    const after = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(after).toMatch(/^mailcore_domains_dkim_failing{process="limiterd"} 0$/m);
  } finally {
    await receiver.stop();
  }
}, 180_000);

test("a start under another master key than the keys were sealed with is refused, saying so", async () => {
  await stack.limiterd.stop("SIGKILL");
  const other = Buffer.alloc(32, 7).toString("base64");
  const { code, stderr } = await runToEnd("cmd/limiterd/index.ts", [], { ...stack.env, DKIM_MASTER_KEY: other });
  expect(code).toBe(1);
  expect(stderr).toContain("cannot start: the DKIM keys of the records do not open");
  expect(stderr).toContain("DKIM_MASTER_KEY (or its file) is not the one the keys were made with");
  expect(stderr).not.toMatch(/BEGIN|PRIVATE KEY/);
}, 60_000);
