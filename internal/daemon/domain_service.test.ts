// The domain service over the records and a DNS server of the test's own, its clock moved by
// hand: names (an IDN kept as punycode, not a domain refused), a rotation's key promoted once its
// record verifies, the old record kept for the grace period then shown removable, then
// forgotten; and no answer that holds a private key.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { ManualClock } from "../clock/clock";
import { splitTxtValue } from "../dkim/keys";
import { MasterKey } from "../dkim/seal";
import { dnsResolver } from "../dnsquery/resolver";
import { DomainService, SendingDomainInfoSchema, type SendingDomainInfo } from "../gen/mailcore/limiter/v1/domains_pb";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { logger } from "../log/log";
import { Records } from "../records/records";
import { type DnsServer, startDnsServer } from "../testkit/dns";
import { TICKET_HEADER } from "../wire/metadata";
import { domainHandlers, RETIRED_GRACE_MS } from "./domain_service";
import { Signing } from "./signing";
import { tenantGate } from "./tenant";
import { Tickets } from "./tickets";

const DAY = 86_400_000;
const clock = new ManualClock(Date.UTC(2026, 10, 28, 12));
let dns: DnsServer;
let records: Records;
let client: ReturnType<typeof createClient<typeof DomainService>>;
let call: { headers: Record<string, string> };

beforeAll(async () => {
  dns = await startDnsServer();
  records = await Records.open({ sqliteFile: ":memory:" });
  const org = await records.directory.createOrganization("acme", Plan.PREMIUM, clock.nowMs());
  const master = MasterKey.generate();
  const log = logger("test");
  const tickets = new Tickets(randomBytes(32), () => Date.now());
  const signing = new Signing({ records, master, clock, log, returnPathSubdomain: "bounces", ed25519: false });
  const transport = createRouterTransport(
    (router) =>
      router.service(
        DomainService,
        domainHandlers({
          records,
          projection: { writeOrg: async () => {} },
          signing,
          clock,
          resolve: dnsResolver({ server: dns.address, timeoutMs: 500, tries: 1 }),
          platform: { returnPathSubdomain: "bounces", spfInclude: "_spf.mail.test", inboundHost: "mx.mail.test" },
          log,
          recheckMs: 3_600_000,
        }),
      ),
    { router: { interceptors: [tenantGate(tickets, log)] } },
  );
  client = createClient(DomainService, transport);
  call = { headers: { [TICKET_HEADER]: tickets.issue(org.id) } };
});
afterAll(async () => {
  await records?.close();
  await dns?.stop();
});

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "answered",
    (err) => Code[ConnectError.from(err).code],
  );
const dkimOf = (d: SendingDomainInfo) => d.records.filter((r) => r.purpose === "dkim");
const selectorOf = (name: string) => name.split(".")[0]!;
const publish = (d: SendingDomainInfo) => {
  for (const r of dkimOf(d)) dns.setTxt(r.name, [splitTxtValue(r.value)]);
};

test("a name: an IDN stored as punycode; what is not a domain refused; the same name twice refused", async () => {
  const { domain } = await client.createDomain({ name: " Bücher.Example. " }, call);
  expect(domain!.name).toBe("xn--bcher-kva.example");
  expect(domain!.status).toBe("pending");
  expect(domain!.records.map((r) => r.purpose)).toEqual(["verification", "dkim", "return-path", "spf", "dmarc"]);
  for (const name of ["", "not a domain", "a..example", "-a.example", `${"a".repeat(64)}.example`, "localhost"])
    expect(`${name}: ${await codeOf(client.createDomain({ name }, call))}`).toBe(`${name}: InvalidArgument`);
  expect(await codeOf(client.createDomain({ name: "xn--bcher-kva.example" }, call))).toBe("AlreadyExists");
});

test("rotation: pending until its record verifies, then it signs; the old record kept for the grace period, then removable, then forgotten", async () => {
  const { domain: made } = await client.createDomain({ name: "rotate.example" }, call);
  const org = (await records.directory.getOrganization("acme")).id;
  const signingSelectors = async () =>
    (await records.domains.keys(org, "rotate.example")).filter((k) => k.state === "active").map((k) => k.selector);
  const [first] = dkimOf(made!).map((r) => selectorOf(r.name));
  expect(first).toBe("mc202611a");

  const { domain: rotated } = await client.rotateDkimKey({ domainId: made!.id }, call);
  expect(dkimOf(rotated!).map((r) => [selectorOf(r.name), r.status])).toEqual([
    ["mc202611a", "pending"],
    ["mc202611b", "pending"],
  ]);
  expect(await codeOf(client.rotateDkimKey({ domainId: made!.id }, call))).toBe("FailedPrecondition");

  // Only the old key's record published: the new key waits, the old one signs.
  dns.setTxt("mc202611a._domainkey.rotate.example", [splitTxtValue(dkimOf(rotated!)[0]!.value)]);
  const waiting = await client.checkDomain({ domainId: made!.id }, call);
  expect(dkimOf(waiting.domain!).map((r) => r.status)).toEqual(["verified", "pending"]);
  expect(await signingSelectors()).toEqual(["mc202611a"]);

  publish(rotated!);
  const promoted = (await client.checkDomain({ domainId: made!.id }, call)).domain!;
  expect(await signingSelectors()).toEqual(["mc202611b"]);
  const old = () => dkimOf(promoted).find((r) => selectorOf(r.name) === "mc202611a")!;
  expect(old().reason).toContain(`keep it published until ${new Date(clock.nowMs() + RETIRED_GRACE_MS).toISOString()}`);

  clock.advance(RETIRED_GRACE_MS + 1);
  const later = (await client.getDomain({ domainId: made!.id }, call)).domain!;
  expect(dkimOf(later).find((r) => selectorOf(r.name) === "mc202611a")!.reason).toStartWith(
    "retired by a rotation: removable since",
  );
  clock.advance(30 * DAY);
  const forgotten = (await client.checkDomain({ domainId: made!.id }, call)).domain!;
  expect(dkimOf(forgotten).map((r) => selectorOf(r.name))).toEqual(["mc202611b"]);
  // A third rotation in the same month takes the next letter, never one published before.
  const third = (await client.rotateDkimKey({ domainId: made!.id }, call)).domain!;
  expect(dkimOf(third).map((r) => selectorOf(r.name))).toContain(
    `mc${new Date(clock.nowMs()).toISOString().slice(0, 7).replace("-", "")}a`,
  );
});

test("no answer holds a private key; delete removes the domain and its keys; another id is not found", async () => {
  const { domains } = await client.listSendingDomains({}, call);
  const text = domains.map((d) => toJsonString(SendingDomainInfoSchema, d)).join("\n");
  expect(text).toContain("p=MIIBIjAN"); // public keys: the records
  expect(text).not.toMatch(/dkimseal|PRIVATE|MIIE[uvw]/); // a PKCS#8 RSA key, sealed or not
  const target = domains.find((d) => d.name === "rotate.example")!;
  await client.deleteDomain({ domainId: target.id }, call);
  expect(await codeOf(client.getDomain({ domainId: target.id }, call))).toBe("NotFound");
  const org = (await records.directory.getOrganization("acme")).id;
  expect(await records.domains.keys(org, "rotate.example")).toEqual([]);
});
