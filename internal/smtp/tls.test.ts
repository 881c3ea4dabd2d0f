// The STARTTLS certificate: the development one made once under the data directory, and a
// configured pair checked at start.
import { describe, expect, test } from "bun:test";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../config/config";
import { tempDir } from "../testkit/testkit";
import { devCertificate, readTls } from "./tls";

describe("the development certificate", () => {
  test("made on the first call, for localhost and 127.0.0.1, its key readable by the owner only; reused after", async () => {
    const dir = join(tempDir(), "tls");
    const files = await devCertificate(dir);
    expect(files).toEqual({ cert: join(dir, "cert.pem"), key: join(dir, "key.pem"), source: "self-signed" });
    expect(statSync(files.key).mode & 0o777).toBe(0o600);
    const x509 = new X509Certificate(readFileSync(files.cert));
    expect(x509.subjectAltName).toContain("DNS:localhost");
    expect(x509.subjectAltName).toContain("IP Address:127.0.0.1");
    expect(Date.parse(x509.validTo) - Date.now()).toBeGreaterThan(365 * 86_400_000);
    expect(x509.checkPrivateKey(createPrivateKey(readFileSync(files.key)))).toBe(true);
    const before = readFileSync(files.cert, "utf8");
    await devCertificate(dir);
    expect(readFileSync(files.cert, "utf8")).toBe(before);
    expect(readTls(files).cert.toString()).toBe(before);
  });

  test("fronts starting together on one data directory end up with one matching pair", async () => {
    const dir = join(tempDir(), "tls");
    const all = await Promise.all(Array.from({ length: 4 }, () => devCertificate(dir)));
    for (const files of all) expect(() => readTls(files)).not.toThrow();
  });

  test("a directory with half a pair is a ConfigError, not a new certificate", async () => {
    const dir = join(tempDir(), "tls");
    const files = await devCertificate(dir);
    rmSync(files.key);
    await expect(devCertificate(dir)).rejects.toThrow(ConfigError);
  });
});

test("a configured pair that does not match is a ConfigError naming the files", async () => {
  const [a, b] = await Promise.all([devCertificate(join(tempDir(), "a")), devCertificate(join(tempDir(), "b"))]);
  expect(() => readTls({ cert: a.cert, key: b.key })).toThrow(ConfigError);
  expect(() => readTls({ cert: a.cert, key: b.key })).toThrow(
    `the TLS certificate ${a.cert} and key ${b.key} cannot be used`,
  );
});
