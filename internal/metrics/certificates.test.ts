// The certificate gauge the expiry alerts read: each file's expiry as a Unix time, by the
// variable that named it, from certificates made the way `certs init` makes them.
import { expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { issueCert, newCa } from "../plane/certs";
import { certificateExpiry, newRegistry } from "./metrics";

const expiry = (pem: string) => Date.parse(new X509Certificate(pem).validTo) / 1_000;

test("each certificate's expiry, by the variable naming its file; a bundle reports its latest; no file, no series", async () => {
  // A CA bundle during a rotation: the old CA first (made six years ago), then the new one.
  const oldCa = await newCa("mailcore test CA 1", new Date(Date.now() - 6 * 365 * 86_400_000));
  const newerCa = await newCa("mailcore test CA 2");
  const leaf = await issueCert(newerCa, {
    name: "mailcore front",
    roles: ["front"],
    notBefore: new Date("2026-01-01T00:00:00Z"),
    notAfter: new Date("2027-03-04T05:06:07Z"),
  });
  const registry = newRegistry("api");
  certificateExpiry(registry, {
    LIMITER_TLS_CLIENT_CERT: leaf.cert,
    LIMITER_TLS_CA: Buffer.from(`${oldCa.cert}\n${newerCa.cert}\n`),
    SMTP_TLS_CERT: undefined,
  });
  const [gauge] = (await registry.getMetricsAsJSON()).filter(
    (m) => m.name === "mailcore_tls_certificate_expiry_seconds",
  );
  const byFile = Object.fromEntries(gauge!.values.map((v) => [v.labels.file, v.value]));
  expect(Object.keys(byFile).sort()).toEqual(["LIMITER_TLS_CA", "LIMITER_TLS_CLIENT_CERT"]);
  expect(byFile.LIMITER_TLS_CLIENT_CERT).toBe(Date.parse("2027-03-04T05:06:07Z") / 1_000);
  expect(expiry(oldCa.cert)).toBeLessThan(expiry(newerCa.cert));
  expect(byFile.LIMITER_TLS_CA).toBe(expiry(newerCa.cert));
});
