import { expect, test } from "bun:test";
import { createPublicKey } from "node:crypto";
import {
  dkimRecordName,
  dkimRecordValue,
  generateDkimKey,
  nextSelectors,
  publicKeyOf,
  splitTxtValue,
  TXT_STRING_MAX,
} from "./keys";
import { parseDkimRecord } from "./record";

test("an RSA key: 2048 bits, its record parses back to the same public key", async () => {
  const key = await generateDkimKey("rsa-sha256");
  expect(key.privateKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
  const value = dkimRecordValue("rsa-sha256", key.publicKey);
  expect(value.startsWith("v=DKIM1; k=rsa; p=MIIB")).toBe(true);
  const parsed = parseDkimRecord(value);
  expect(parsed.ok && parsed.record.publicKey).toBe(key.publicKey);
  expect(parsed.ok && parsed.record.keyBits).toBe(2048);
  // p= is the public half of this private key.
  const spki = createPublicKey(key.privateKey).export({ format: "der", type: "spki" }).toString("base64");
  expect(key.publicKey).toBe(spki);
});

test("an Ed25519 key: its record holds the bare 32-byte key", async () => {
  const key = await generateDkimKey("ed25519-sha256");
  expect(Buffer.from(key.publicKey, "base64")).toHaveLength(32);
  const parsed = parseDkimRecord(dkimRecordValue("ed25519-sha256", key.publicKey));
  expect(parsed.ok && parsed.record.keyType).toBe("ed25519");
  expect(parsed.ok && parsed.record.publicKey).toBe(key.publicKey);
});

test("a key of the wrong type for the algorithm is refused", async () => {
  const ed = await generateDkimKey("ed25519-sha256");
  expect(() => publicKeyOf("rsa-sha256", ed.privateKey)).toThrow("a key of type ed25519 cannot sign rsa-sha256");
});

test("the record's name", () => {
  expect(dkimRecordName("mc202611a", "example.com")).toBe("mc202611a._domainkey.example.com");
});

test("a 2048-bit key's record is split into strings of at most 255 bytes that join back to it", async () => {
  const key = await generateDkimKey("rsa-sha256");
  const value = dkimRecordValue("rsa-sha256", key.publicKey);
  const strings = splitTxtValue(value);
  expect(strings.length).toBe(2);
  expect(strings.every((s) => Buffer.byteLength(s) <= TXT_STRING_MAX)).toBe(true);
  expect(strings.join("")).toBe(value);
  expect(splitTxtValue("v=DKIM1; k=ed25519; p=abc")).toEqual(["v=DKIM1; k=ed25519; p=abc"]);
  expect(splitTxtValue("x".repeat(510))).toEqual(["x".repeat(255), "x".repeat(255)]);
  expect(() => splitTxtValue("p=caf\u00e9")).toThrow("printable ASCII");
});

test("selectors: the month, then the first letter not used that month", () => {
  const nov = new Date("2026-11-05T12:00:00Z");
  expect(nextSelectors(nov, [])).toEqual({ rsa: "mc202611a", ed25519: "mc202611a-ed" });
  expect(nextSelectors(nov, ["mc202611a"]).rsa).toBe("mc202611b");
  // An Ed25519 selector uses its letter too, and names are compared as DNS does, without case.
  expect(nextSelectors(nov, ["MC202611A-ED", "mc202611b"]).rsa).toBe("mc202611c");
  // Last month's selectors leave this month's letters free.
  expect(nextSelectors(new Date("2026-12-01T00:00:00Z"), ["mc202611a", "mc202611b"]).rsa).toBe("mc202612a");
  // The month is UTC's.
  expect(nextSelectors(new Date("2026-01-31T23:30:00-02:00"), []).rsa).toBe("mc202602a");
  const all = [..."abcdefghijklmnopqrstuvwxyz"].map((l) => `mc202611${l}`);
  expect(() => nextSelectors(nov, all)).toThrow("26 DKIM keys were already made for this domain in 202611");
});
