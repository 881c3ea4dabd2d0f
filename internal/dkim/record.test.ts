import { expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { parseDkimRecord } from "./record";

const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey;
const P_RSA = rsa.export({ format: "der", type: "spki" }).toString("base64");
const P_RSA_PKCS1 = rsa.export({ format: "der", type: "pkcs1" }).toString("base64");
const ed = generateKeyPairSync("ed25519").publicKey;
const P_ED = ed.export({ format: "der", type: "spki" }).subarray(-32).toString("base64");

function reason(txt: string | string[]): string {
  const r = parseDkimRecord(txt);
  if (r.ok) throw new Error("parsed");
  return r.reason;
}

test("an RSA record: the key, its size, its tags in order", () => {
  const r = parseDkimRecord(`v=DKIM1; k=rsa; p=${P_RSA}`);
  expect(r.ok).toBe(true);
  if (!r.ok) return;
  expect(r.record.keyType).toBe("rsa");
  expect(r.record.publicKey).toBe(P_RSA);
  expect(r.record.keyBits).toBe(2048);
  expect(r.record.testing).toBe(false);
  expect([...r.record.tags.keys()]).toEqual(["v", "k", "p"]);
});

test("k= defaults to rsa, and v= may be left out", () => {
  const r = parseDkimRecord(`p=${P_RSA}`);
  expect(r.ok && r.record.keyType).toBe("rsa");
});

test("a record split into strings is one record, the strings joined with nothing between them", () => {
  const whole = `v=DKIM1; k=rsa; p=${P_RSA}`;
  const parts = [whole.slice(0, 255), whole.slice(255)];
  const r = parseDkimRecord(parts);
  expect(r.ok && r.record.publicKey).toBe(P_RSA);
  // The split may fall inside a tag name or right after the "=".
  expect(parseDkimRecord(["v=DKIM1; k=r", "sa; p", "=", P_RSA]).ok).toBe(true);
});

test("other spacing: around tags, around '=', inside p=, a trailing semicolon", () => {
  const spaced = `  v = DKIM1 ;\tk=rsa ;  p= ${P_RSA.slice(0, 100)} \r\n ${P_RSA.slice(100, 200)}\t${P_RSA.slice(200)} ; `;
  const r = parseDkimRecord(spaced);
  expect(r.ok && r.record.publicKey).toBe(P_RSA);
});

test("t=y marks a domain that is testing; t=s strict subdomains; flags may come together", () => {
  const r = parseDkimRecord(`v=DKIM1; t=s:y; p=${P_RSA}`);
  expect(r.ok && r.record.testing).toBe(true);
  expect(r.ok && r.record.strictSubdomains).toBe(true);
  const strictOnly = parseDkimRecord(`v=DKIM1; t=s; p=${P_RSA}`);
  expect(strictOnly.ok && strictOnly.record.testing).toBe(false);
});

test("unknown tags are kept and do not refuse the record", () => {
  const r = parseDkimRecord(`v=DKIM1; n=made by mailcore; x9=1; p=${P_RSA}`);
  expect(r.ok && r.record.tags.get("n")).toBe("made by mailcore");
});

test("an RSA key as a bare RSAPublicKey is read too", () => {
  const r = parseDkimRecord(`v=DKIM1; p=${P_RSA_PKCS1}`);
  expect(r.ok && r.record.keyBits).toBe(2048);
});

test("an Ed25519 record holds the bare 32-byte key", () => {
  const r = parseDkimRecord(`v=DKIM1; k=ed25519; p=${P_ED}`);
  expect(r.ok && r.record.keyType).toBe("ed25519");
  expect(r.ok && r.record.keyBits).toBe(256);
  const spki = ed.export({ format: "der", type: "spki" }).toString("base64");
  expect(reason(`v=DKIM1; k=ed25519; p=${spki}`)).toContain("an Ed25519 key is 32");
});

test("a truncated RSA key is refused as such", () => {
  // Cut on a four-character boundary, so that what is left is still valid base64.
  expect(reason(`v=DKIM1; k=rsa; p=${P_RSA.slice(0, 300)}`)).toBe("p= is not an RSA public key (truncated?)");
});

test("an RSA key too short for receivers is refused", () => {
  const short = generateKeyPairSync("rsa", { modulusLength: 512 })
    .publicKey.export({ format: "der", type: "spki" })
    .toString("base64");
  expect(reason(`p=${short}`)).toContain("512 bits; receivers need at least 1024");
});

test("p= missing, empty (revoked), not base64, or holding the zone file's quotes", () => {
  expect(reason("v=DKIM1; k=rsa")).toBe("the record has no p= (public key) tag");
  expect(reason("v=DKIM1; k=rsa; p=")).toBe("p= is empty: the key is revoked");
  expect(reason("v=DKIM1; p=abc!")).toBe("p= is not base64");
  expect(reason(`v=DKIM1; k=rsa; p=${P_RSA.slice(0, 200)}" "${P_RSA.slice(200)}`)).toContain(
    "quote characters: the DNS host kept the quotes",
  );
});

test("v= other than DKIM1, or not first", () => {
  expect(reason(`v=DKIM2; p=${P_RSA}`)).toContain("must be v=DKIM1");
  expect(reason(`k=rsa; v=DKIM1; p=${P_RSA}`)).toContain("as the record's first tag");
});

test("a tag twice makes the whole record invalid", () => {
  expect(reason(`v=DKIM1; p=${P_RSA}; p=${P_RSA}`)).toBe(
    "the tag p= appears twice, which makes the whole record invalid",
  );
});

test("key types, hashes and services that leave no signature of ours verifiable", () => {
  expect(reason(`v=DKIM1; k=dsa; p=${P_RSA}`)).toContain("k=dsa is not a key type");
  expect(reason(`v=DKIM1; h=sha1; p=${P_RSA}`)).toContain("does not allow sha256");
  expect(parseDkimRecord(`v=DKIM1; h=sha1:sha256; p=${P_RSA}`).ok).toBe(true);
  expect(reason(`v=DKIM1; s=tlsrpt; p=${P_RSA}`)).toBe("s=tlsrpt does not cover email");
  expect(parseDkimRecord(`v=DKIM1; s=email; p=${P_RSA}`).ok).toBe(true);
});

test("text that is not a tag list", () => {
  expect(reason("")).toBe("the record is empty or has an empty tag (;;)");
  expect(reason(`v=DKIM1;; p=${P_RSA}`)).toBe("the record is empty or has an empty tag (;;)");
  expect(reason("v=spf1 include:_spf.example.com ~all")).toBe(
    "v=spf1 include:_spf.example.com ~all must be v=DKIM1, as the record's first tag",
  );
  expect(reason(`v=DKIM1; p=${P_RSA}; just words`)).toBe('"just words" is not a tag=value');
  expect(reason(`1v=DKIM1; p=${P_RSA}`)).toBe('"1v" is not a tag name');
  expect(reason("v=DKIM1; n=caf\u00e9; p=x")).toContain("the value of n= holds characters");
});
