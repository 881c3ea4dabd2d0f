import { expect, test } from "bun:test";
import { domainStatus, whatChanged } from "./changes";
import {
  type DomainRecord,
  organizationalDomain,
  type Platform,
  recordsToPublish,
  type SendingDomain,
} from "./records";

const PLATFORM: Platform = {
  returnPathSubdomain: "bounces",
  spfInclude: "spf.mailcore.example",
  inboundHost: "inbound.mailcore.example",
};

const DOMAIN: SendingDomain = {
  name: "news.example.co.uk",
  verifyValue: "abc123",
  keys: [
    { selector: "mc202611a", algorithm: "rsa-sha256", publicKey: "MIIBIjAN", state: "active" },
    { selector: "mc202612a", algorithm: "rsa-sha256", publicKey: "MIIBIjAO", state: "pending" },
  ],
};

test("the records to publish: fully qualified names, exact values, all pending", () => {
  expect(recordsToPublish(DOMAIN, PLATFORM)).toEqual([
    {
      purpose: "verification",
      type: "TXT",
      name: "_mailcore.news.example.co.uk",
      value: "mailcore-verify=abc123",
      status: "pending",
      required: true,
    },
    {
      purpose: "dkim",
      type: "TXT",
      name: "mc202611a._domainkey.news.example.co.uk",
      value: "v=DKIM1; k=rsa; p=MIIBIjAN",
      status: "pending",
      required: true,
    },
    {
      purpose: "dkim",
      type: "TXT",
      name: "mc202612a._domainkey.news.example.co.uk",
      value: "v=DKIM1; k=rsa; p=MIIBIjAO",
      status: "pending",
      required: false,
    },
    {
      purpose: "return-path",
      type: "MX",
      name: "bounces.news.example.co.uk",
      value: "10 inbound.mailcore.example",
      status: "pending",
      required: true,
    },
    {
      purpose: "spf",
      type: "TXT",
      name: "bounces.news.example.co.uk",
      value: "v=spf1 include:spf.mailcore.example -all",
      status: "pending",
      required: true,
    },
    {
      purpose: "dmarc",
      type: "TXT",
      name: "_dmarc.example.co.uk",
      value: "v=DMARC1; p=none; rua=mailto:dmarc-reports@example.co.uk",
      status: "pending",
      required: false,
    },
  ]);
  const rua = recordsToPublish(DOMAIN, { ...PLATFORM, dmarcReports: "dmarc@reports.mailcore.example" }).at(-1);
  expect(rua?.value).toBe("v=DMARC1; p=none; rua=mailto:dmarc@reports.mailcore.example");
});

test("the organizational domain by the Public Suffix List, its private section included", () => {
  expect(organizationalDomain("a.b.example.co.uk")).toBe("example.co.uk");
  expect(organizationalDomain("example.com")).toBe("example.com");
  expect(organizationalDomain("mail.xn--bcher-kva.de")).toBe("xn--bcher-kva.de");
  expect(organizationalDomain("shop.someone.github.io")).toBe("someone.github.io");
  expect(organizationalDomain("localhost")).toBe("localhost");
});

const records = recordsToPublish(DOMAIN, PLATFORM);
const withStatus = (statuses: DomainRecord["status"][]): DomainRecord[] =>
  records.map((r, i) => ({ ...r, status: statuses[i]! }));

test("the domain's status waits on the required records only", () => {
  expect(domainStatus([])).toBe("pending");
  expect(domainStatus(records)).toBe("pending");
  // The pending key's record and the DMARC advice do not count.
  expect(domainStatus(withStatus(["verified", "verified", "failed", "verified", "verified", "pending"]))).toBe(
    "verified",
  );
  expect(domainStatus(withStatus(["verified", "verified", "pending", "failed", "verified", "verified"]))).toBe(
    "failed",
  );
  expect(domainStatus(withStatus(["verified", "pending", "pending", "verified", "verified", "verified"]))).toBe(
    "pending",
  );
});

test("what changed: the records, the domain, the event", () => {
  const before = withStatus(["verified", "verified", "pending", "pending", "verified", "pending"]);
  const after = withStatus(["verified", "verified", "pending", "verified", "verified", "verified"]);
  expect(whatChanged(before, after)).toEqual({
    records: [
      { purpose: "return-path", type: "MX", name: "bounces.news.example.co.uk", from: "pending", to: "verified" },
      { purpose: "dmarc", type: "TXT", name: "_dmarc.example.co.uk", from: "pending", to: "verified" },
    ],
    domain: { from: "pending", to: "verified" },
    event: "domain.verified",
  });
  const failed = after.map((r) => (r.purpose === "spf" ? { ...r, status: "failed" as const, reason: "why" } : r));
  expect(whatChanged(after, failed)).toEqual({
    records: [
      {
        purpose: "spf",
        type: "TXT",
        name: "bounces.news.example.co.uk",
        from: "verified",
        to: "failed",
        reason: "why",
      },
    ],
    domain: { from: "verified", to: "failed" },
    event: "domain.failed",
  });
  // Nothing changed: nothing to say.
  expect(whatChanged(after, after)).toEqual({ records: [] });
  // A failed domain that goes back to pending sends no event.
  const pending = failed.map((r) => (r.purpose === "spf" ? { ...r, status: "pending" as const } : r));
  expect(whatChanged(failed, pending)).toMatchObject({ domain: { from: "failed", to: "pending" } });
  expect(whatChanged(failed, pending).event).toBeUndefined();
});

test("what changed: a new key's record appears, a retired one goes", () => {
  const [verification, active, next, ...rest] = withStatus([
    "verified",
    "verified",
    "verified",
    "verified",
    "verified",
    "verified",
  ]);
  const rotated = [verification!, { ...next!, required: true }, ...rest];
  const change = whatChanged([verification!, active!, ...rest], rotated);
  expect(change.records).toEqual([
    { purpose: "dkim", type: "TXT", name: "mc202612a._domainkey.news.example.co.uk", from: undefined, to: "verified" },
    { purpose: "dkim", type: "TXT", name: "mc202611a._domainkey.news.example.co.uk", from: "verified", to: undefined },
  ]);
  expect(change.event).toBeUndefined();
});
