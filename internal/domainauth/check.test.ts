import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { dkimRecordValue, publicKeyOf, splitTxtValue } from "../dkim/keys";
import { dnsResolver, type Resolve } from "../dnsquery/resolver";
import { type Dnsmasq, type DnsRecord, startDnsmasq, tableOf } from "../testkit/dnsmasq";
import { domainStatus, whatChanged } from "./changes";
import { checkDomain } from "./check";
import { type DomainRecord, type Platform, recordsToPublish, type SendingDomain } from "./records";

const PLATFORM: Platform = {
  returnPathSubdomain: "bounces",
  spfInclude: "spf.platform.test",
  inboundHost: "inbound.platform.test",
};

const rsaKey = () => publicKeyOf("rsa-sha256", generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey);
const KEY = rsaKey();
const OTHER_KEY = rsaKey();
const ED_KEY = publicKeyOf("ed25519-sha256", generateKeyPairSync("ed25519").privateKey);

function domain(
  name: string,
  keys: SendingDomain["keys"] = [{ selector: "mc202611a", algorithm: "rsa-sha256", publicKey: KEY, state: "active" }],
): SendingDomain {
  return { name, verifyValue: `v-${name}`, keys };
}

/** The table of a domain that published every record as shown, the DKIM value split in 255-byte strings. */
function published(d: SendingDomain): DnsRecord[] {
  return tableOf(recordsToPublish(d, PLATFORM));
}

const without = (table: DnsRecord[], name: string) => table.filter((r) => r.name !== name);
const byPurpose = (records: DomainRecord[], purpose: string) => records.filter((r) => r.purpose === purpose);
const one = (records: DomainRecord[], purpose: string) => {
  const [r] = byPurpose(records, purpose);
  return { status: r!.status, reason: r!.reason };
};

// Each scenario its own domain, all in one dnsmasq table.
const ALL_GOOD = domain("good.test", [
  { selector: "mc202611a", algorithm: "rsa-sha256", publicKey: KEY, state: "active" },
  { selector: "mc202611a-ed", algorithm: "ed25519-sha256", publicKey: ED_KEY, state: "active" },
]);
const SUB = domain("mail.parent.test");
const NOTHING = domain("nothing.test");
const SPACED = domain("spaced.test");
const TWO_DKIM = domain("two-dkim.test");
const TESTING = domain("testing.test");
const WRONG_KEY = domain("wrong-key.test");
const TRUNCATED = domain("truncated.test");
const QUOTED = domain("quoted.test");
const BAD_SPF = domain("bad-spf.test");
const TWO_SPF = domain("two-spf.test");
const MX_ELSEWHERE = domain("mx-elsewhere.test");
const NULL_MX = domain("null-mx.test");
const DMARC_REJECT = domain("reject.test");
const TWO_DMARC = domain("two-dmarc.test");
const WRONG_TOKEN = domain("wrong-token.test");
const QUOTED_SPF_DMARC = domain("quoted-spf.test");
const SLOW = domain("slow.test");

const dkimName = (d: SendingDomain) => `mc202611a._domainkey.${d.name}`;
const dkimTxt = (d: SendingDomain, ...strings: string[]): DnsRecord => ({ type: "TXT", name: dkimName(d), strings });
const FULL = dkimRecordValue("rsa-sha256", KEY);

const TABLE: DnsRecord[] = [
  ...published(ALL_GOOD),
  // A subdomain: DMARC at the organizational domain, nothing at _dmarc.mail.parent.test.
  ...without(published(SUB), "_dmarc.parent.test"),
  { type: "TXT", name: "_dmarc.parent.test", strings: ["v=DMARC1; p=none; rua=mailto:d@parent.test"] },
  { type: "TXT", name: "nothing.test", strings: ["v=spf1 -all"] },
  // Other spacing, the key itself split by spaces and strings at odd places: one record all the same.
  ...without(published(SPACED), dkimName(SPACED)),
  dkimTxt(SPACED, "v = DKIM1 ;k=rsa ;  p=", `${KEY.slice(0, 100)} ${KEY.slice(100, 200)}`, `\t${KEY.slice(200)} ;`),
  ...published(TWO_DKIM),
  dkimTxt(TWO_DKIM, "v=DKIM1; k=rsa; p=", KEY),
  ...without(published(TESTING), dkimName(TESTING)),
  dkimTxt(TESTING, ...splitTxtValue(`v=DKIM1; k=rsa; t=y; p=${KEY}`)),
  ...without(published(WRONG_KEY), dkimName(WRONG_KEY)),
  dkimTxt(WRONG_KEY, ...splitTxtValue(dkimRecordValue("rsa-sha256", OTHER_KEY))),
  ...without(published(TRUNCATED), dkimName(TRUNCATED)),
  // A DNS panel that cut the value at 255 characters.
  dkimTxt(TRUNCATED, FULL.slice(0, 255)),
  ...without(published(QUOTED), dkimName(QUOTED)),
  dkimTxt(QUOTED, `"v=DKIM1; k=rsa; p=${KEY.slice(0, 200)}"`, `"${KEY.slice(200)}"`),
  ...without(published(BAD_SPF), `bounces.${BAD_SPF.name}`),
  { type: "MX", name: `bounces.${BAD_SPF.name}`, preference: 10, exchange: PLATFORM.inboundHost },
  { type: "TXT", name: `bounces.${BAD_SPF.name}`, strings: ["v=spf1 include:other.test ~all"] },
  ...published(TWO_SPF),
  { type: "TXT", name: `bounces.${TWO_SPF.name}`, strings: ["v=spf1 include:another.test -all"] },
  ...published(MX_ELSEWHERE),
  { type: "MX", name: `bounces.${MX_ELSEWHERE.name}`, preference: 20, exchange: "backup.elsewhere.test" },
  ...without(published(NULL_MX), `bounces.${NULL_MX.name}`),
  { type: "MX", name: `bounces.${NULL_MX.name}`, preference: 0, exchange: "." },
  { type: "TXT", name: `bounces.${NULL_MX.name}`, strings: [`v=spf1 include:${PLATFORM.spfInclude} -all`] },
  ...without(published(DMARC_REJECT), `_dmarc.${DMARC_REJECT.name}`),
  { type: "TXT", name: `_dmarc.${DMARC_REJECT.name}`, strings: ["v=DMARC1;p=reject"] },
  ...published(TWO_DMARC),
  { type: "TXT", name: `_dmarc.${TWO_DMARC.name}`, strings: ["v=DMARC1; p=reject"] },
  ...without(published(WRONG_TOKEN), `_mailcore.${WRONG_TOKEN.name}`),
  { type: "TXT", name: `_mailcore.${WRONG_TOKEN.name}`, strings: ["mailcore-verify=someone-else"] },
  { type: "TXT", name: `_mailcore.${WRONG_TOKEN.name}`, strings: ["unrelated=1"] },
  ...without(without(published(QUOTED_SPF_DMARC), "bounces.quoted-spf.test"), "_dmarc.quoted-spf.test"),
  { type: "MX", name: "bounces.quoted-spf.test", preference: 10, exchange: PLATFORM.inboundHost },
  { type: "TXT", name: "bounces.quoted-spf.test", strings: [`"v=spf1 include:${PLATFORM.spfInclude} -all"`] },
  { type: "TXT", name: "_dmarc.quoted-spf.test", strings: ['"v=DMARC1; p=none"'] },
  { type: "timeout", name: SLOW.name },
];

describe("checkDomain against dnsmasq", () => {
  let dns: Dnsmasq;
  let resolve: Resolve;
  beforeAll(async () => {
    dns = await startDnsmasq(TABLE);
    resolve = dnsResolver({ server: dns.address, timeoutMs: 250, tries: 1 });
  });
  afterAll(async () => {
    await dns?.stop();
  });

  const check = (d: SendingDomain, previous?: DomainRecord[]) => checkDomain(resolve, d, PLATFORM, previous);

  test("every record published as shown verifies; DMARC p=none verifies with a note", async () => {
    const records = await check(ALL_GOOD);
    expect(records.map((r) => [r.purpose, r.type, r.name, r.status])).toEqual([
      ["verification", "TXT", "_mailcore.good.test", "verified"],
      ["dkim", "TXT", "mc202611a._domainkey.good.test", "verified"],
      ["dkim", "TXT", "mc202611a-ed._domainkey.good.test", "verified"],
      ["return-path", "MX", "bounces.good.test", "verified"],
      ["spf", "TXT", "bounces.good.test", "verified"],
      ["dmarc", "TXT", "_dmarc.good.test", "verified"],
    ]);
    expect(one(records, "dmarc").reason).toStartWith("p=none at _dmarc.good.test: receivers report");
    expect(records.filter((r) => r.purpose !== "dmarc").every((r) => r.reason === undefined)).toBe(true);
    expect(domainStatus(records)).toBe("verified");
  });

  test("a subdomain's DMARC is its organizational domain's", async () => {
    const records = await check(SUB);
    expect(byPurpose(records, "dmarc")[0]).toMatchObject({ name: "_dmarc.parent.test", status: "verified" });
  });

  test("nothing published: every record pending, each saying what is missing", async () => {
    const records = await check(NOTHING);
    expect(records.map((r) => [r.purpose, r.status, r.reason])).toEqual([
      ["verification", "pending", "no TXT record at _mailcore.nothing.test (the name does not exist)"],
      ["dkim", "pending", "no TXT record at mc202611a._domainkey.nothing.test (the name does not exist)"],
      ["return-path", "pending", "no MX record at bounces.nothing.test (the name does not exist)"],
      ["spf", "pending", "no TXT record at bounces.nothing.test (the name does not exist)"],
      ["dmarc", "pending", "no TXT record at _dmarc.nothing.test (the name does not exist)"],
    ]);
    expect(domainStatus(records)).toBe("pending");
  });

  test("a DKIM record with other spacing and odd string breaks verifies", async () => {
    expect(one(await check(SPACED), "dkim")).toEqual({ status: "verified", reason: undefined });
  });

  test("DKIM records that fail, each with its reason", async () => {
    expect(one(await check(TWO_DKIM), "dkim")).toEqual({
      status: "failed",
      reason:
        "2 TXT records at mc202611a._domainkey.two-dkim.test: receivers need exactly one key record there; remove the others",
    });
    expect(one(await check(TESTING), "dkim").reason).toStartWith(
      "the DKIM record at mc202611a._domainkey.testing.test has t=y: receivers treat the domain as testing DKIM",
    );
    expect(one(await check(WRONG_KEY), "dkim").reason).toStartWith(
      "the DKIM record at mc202611a._domainkey.wrong-key.test holds another key than this selector's",
    );
    expect(one(await check(TRUNCATED), "dkim")).toEqual({
      status: "failed",
      reason: `the DKIM record at mc202611a._domainkey.truncated.test: p= is cut short: it holds ${255 - 18} of the key's ${KEY.length} characters (some DNS hosts cut a value at 255 characters: publish it as the two strings shown, or as one value if the host splits it)`,
    });
    expect(one(await check(QUOTED), "dkim")).toEqual({
      status: "failed",
      reason:
        "the TXT record at mc202611a._domainkey.quoted.test holds quote characters: the DNS host kept the quotes as part of the text; publish the value without them",
    });
    const failed = await check(WRONG_KEY);
    expect(domainStatus(failed)).toBe("failed");
  });

  test("SPF: an include that does not pass, two SPF records", async () => {
    expect(one(await check(BAD_SPF), "spf")).toEqual({
      status: "failed",
      reason: "the SPF record at bounces.bad-spf.test: the record has no include:spf.platform.test",
    });
    expect(one(await check(TWO_SPF), "spf")).toEqual({
      status: "failed",
      reason: "2 SPF records at bounces.two-spf.test: receivers give a permanent error; merge them into one",
    });
  });

  test("SPF and DMARC records published with their quotes fail, saying so", async () => {
    const records = await check(QUOTED_SPF_DMARC);
    expect(one(records, "spf")).toEqual({
      status: "failed",
      reason:
        "the TXT record at bounces.quoted-spf.test holds quote characters: the DNS host kept the quotes as part of the text; publish the value without them",
    });
    expect(one(records, "dmarc").reason).toStartWith("the TXT record at _dmarc.quoted-spf.test holds quote characters");
  });

  test("the return path's MX: another host beside ours, a null MX", async () => {
    expect(one(await check(MX_ELSEWHERE), "return-path")).toEqual({
      status: "failed",
      reason:
        "the MX records of bounces.mx-elsewhere.test also point at backup.elsewhere.test: bounces would go there too; keep only inbound.platform.test",
    });
    expect(one(await check(NULL_MX), "return-path").reason).toBe(
      'bounces.null-mx.test has a null MX ("0 ."), which says it takes no mail: bounces could not come back',
    );
  });

  test("DMARC: any policy verifies; two records fail", async () => {
    expect(one(await check(DMARC_REJECT), "dmarc")).toEqual({ status: "verified", reason: undefined });
    expect(one(await check(TWO_DMARC), "dmarc")).toEqual({
      status: "failed",
      reason: "2 DMARC records at _dmarc.two-dmarc.test: receivers apply none of them; keep one",
    });
  });

  test("the ownership record with another value fails", async () => {
    expect(one(await check(WRONG_TOKEN), "verification")).toEqual({
      status: "failed",
      reason:
        "the TXT record at _mailcore.wrong-token.test holds mailcore-verify=someone-else, not this domain's value",
    });
  });

  test("a timeout keeps every record's last status and says so", async () => {
    const before = (await check(ALL_GOOD)).map((r) => ({ ...r, name: r.name.replace("good.test", SLOW.name) }));
    const previous = recordsToPublish(SLOW, PLATFORM).map((r, i) => ({ ...r, status: before[i]!.status }));
    const records = await check(SLOW, previous);
    expect(records.map((r) => r.status)).toEqual(previous.map((r) => r.status));
    for (const r of records)
      expect(r.reason).toMatch(
        /: no answer from 127\.0\.0\.1:\d+ within 250 ms; the status is kept from the last check until DNS answers$/,
      );
    expect(whatChanged(previous, records)).toEqual({ records: [] });
    // With no last check, the records stay pending.
    expect((await check(SLOW)).map((r) => r.status)).toEqual(Array(previous.length).fill("pending"));
  });

  test("a verified record that disappears fails; the change is domain.failed, and back", async () => {
    const verified = await check(ALL_GOOD);
    await dns.setRecords(without(TABLE, dkimName(ALL_GOOD)));
    try {
      const gone = await check(ALL_GOOD, verified);
      expect(one(gone, "dkim")).toEqual({
        status: "failed",
        reason: "no TXT record at mc202611a._domainkey.good.test (the name does not exist); it was verified before",
      });
      const change = whatChanged(verified, gone);
      expect(change.event).toBe("domain.failed");
      expect(change.records).toEqual([
        {
          purpose: "dkim",
          type: "TXT",
          name: "mc202611a._domainkey.good.test",
          from: "verified",
          to: "failed",
          reason: "no TXT record at mc202611a._domainkey.good.test (the name does not exist); it was verified before",
        },
      ]);
    } finally {
      await dns.setRecords(TABLE);
    }
    const back = await check(ALL_GOOD, verified);
    expect(whatChanged(verified, back)).toEqual({ records: [] });
  });
});
