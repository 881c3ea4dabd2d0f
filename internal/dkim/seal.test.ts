import { afterAll, expect, test } from "bun:test";
import { randomBytes, sign, verify } from "node:crypto";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { generateDkimKey, publicKeyOf } from "./keys";
import {
  ensureMasterKeyFile,
  MASTER_KEY_FILE,
  MasterKey,
  MasterKeyError,
  openPrivateKey,
  readMasterKeyFile,
  SealedKeyError,
  sealPrivateKey,
} from "./seal";

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "dkim-seal-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const masterText = randomBytes(32).toString("base64");
const master = MasterKey.fromBase64(masterText, "DKIM_MASTER_KEY");
const rsa = await generateDkimKey("rsa-sha256");
const ed = await generateDkimKey("ed25519-sha256");
const rsaDer = rsa.privateKey.export({ format: "der", type: "pkcs8" }).toString("base64");

/** Nothing printed may hold the master key or a private key, in any of the encodings they come in. */
function expectNoSecret(text: string): void {
  const secrets = [masterText, Buffer.from(masterText, "base64").toString("hex"), rsaDer, rsaDer.slice(40, 80)];
  for (const s of secrets) expect(text).not.toContain(s);
  expect(text).not.toContain("PRIVATE KEY");
}

function sealedError(fn: () => unknown): SealedKeyError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SealedKeyError) {
      expectNoSecret(`${err.message} ${String(err)} ${JSON.stringify(err)}`);
      return err;
    }
    throw err;
  }
  throw new Error("did not throw");
}

test("a sealed key opens to the same key: it signs what its public key verifies", () => {
  for (const pair of [rsa, ed]) {
    const opened = openPrivateKey(sealPrivateKey(pair.privateKey, master), master);
    expect(publicKeyOf(pair.algorithm, opened)).toBe(pair.publicKey);
    const data = Buffer.from("signed bytes");
    const hash = pair.algorithm === "rsa-sha256" ? "sha256" : null;
    expect(verify(hash, data, pair.privateKey, sign(hash, data, opened))).toBe(true);
  }
});

test("the sealed text names its master key and holds no key material in the clear", () => {
  const sealed = sealPrivateKey(rsa.privateKey, master);
  expect(sealed.startsWith(`dkimseal1.${master.id}.`)).toBe(true);
  expectNoSecret(sealed);
  // A fresh IV each time.
  expect(sealPrivateKey(rsa.privateKey, master)).not.toBe(sealed);
});

test("another master key: told apart from damage, with both fingerprints and nothing else", () => {
  const other = MasterKey.generate();
  const err = sealedError(() => openPrivateKey(sealPrivateKey(rsa.privateKey, master), other));
  expect(err.reason).toBe("wrong-master-key");
  expect(err.message).toBe(
    `the DKIM key was sealed under master key ${master.id}, and the master key given is ${other.id}: DKIM_MASTER_KEY (or its file) is not the one the keys were made with`,
  );
});

test("damage anywhere is corrupt, never a key and never the wrong master key", () => {
  const sealed = sealPrivateKey(rsa.privateKey, master);
  const [version, id, iv, body, tag] = sealed.split(".") as [string, string, string, string, string];
  const flip = (s: string, at: number) => s.slice(0, at) + (s[at] === "A" ? "B" : "A") + s.slice(at + 1);
  const damaged = [
    [version, id, flip(iv, 3), body, tag],
    [version, id, iv, flip(body, 100), tag],
    [version, id, iv, body.slice(0, -8), tag],
    [version, id, iv, body, flip(tag, 5)],
  ].map((p) => p.join("."));
  for (const d of damaged) {
    const err = sealedError(() => openPrivateKey(d, master));
    expect(err.reason).toBe("corrupt");
    expect(err.message).toBe(
      `the sealed DKIM key is corrupt: it does not authenticate under master key ${master.id}, which it names`,
    );
  }
  for (const d of ["", sealed.slice(0, 40), `dkimseal2${sealed.slice(9)}`, `${sealed}.x`, sealed.replace(/\./g, ":")]) {
    const err = sealedError(() => openPrivateKey(d, master));
    expect(err.reason).toBe("corrupt");
    expect(err.message).toBe("the sealed DKIM key is corrupt: it is not in the dkimseal1 format");
  }
});

test("the master key is 32 bytes of base64; a bad one is refused without being echoed", () => {
  expect(MasterKey.fromBase64(`  ${masterText}\n`, "DKIM_MASTER_KEY").id).toBe(master.id);
  const bad = [randomBytes(16).toString("base64"), "not base64 at all!", `${masterText}AAAA`, masterText.slice(1)];
  for (const text of bad) {
    let message = "";
    try {
      MasterKey.fromBase64(text, "DKIM_MASTER_KEY");
    } catch (err) {
      expect(err).toBeInstanceOf(MasterKeyError);
      message = (err as Error).message;
    }
    expect(message).toBe(
      "DKIM_MASTER_KEY must be the base64 of 32 random bytes (make one with: openssl rand -base64 32)",
    );
  }
});

test("a master key prints, serialises and inspects as its fingerprint", () => {
  expect(master.id).toMatch(/^[0-9a-f]{16}$/);
  const shown = [String(master), `${master}`, JSON.stringify({ master }), inspect(master), Bun.inspect(master)];
  for (const s of shown) {
    expectNoSecret(s);
    expect(s).toContain(master.id);
  }
});

test("a key pair prints, serialises and inspects without its private key", () => {
  const shown = [String(rsa.privateKey), JSON.stringify(rsa), inspect(rsa, { depth: 5 }), Bun.inspect(rsa)];
  for (const s of shown) expectNoSecret(s);
});

test("npm start's key file: made once with mode 0600, then read back", () => {
  const dir = join(tempDir(), "data");
  const first = ensureMasterKeyFile(dir);
  expect(first.created).toBe(true);
  expect(first.path).toBe(join(dir, MASTER_KEY_FILE));
  expect(statSync(first.path).mode & 0o777).toBe(0o600);
  expect(readdirSync(dir)).toEqual([MASTER_KEY_FILE]);
  const second = ensureMasterKeyFile(dir);
  expect(second.created).toBe(false);
  expect(second.key.id).toBe(first.key.id);
  expect(readMasterKeyFile(first.path).id).toBe(first.key.id);
  // The file's key opens what the first start sealed.
  const sealed = sealPrivateKey(ed.privateKey, first.key);
  expect(publicKeyOf("ed25519-sha256", openPrivateKey(sealed, second.key))).toBe(ed.publicKey);
});

test("a key file that is missing, damaged or readable by others is an error naming the file, never replaced", () => {
  const dir = tempDir();
  const path = join(dir, MASTER_KEY_FILE);
  expect(() => readMasterKeyFile(path)).toThrow(`the DKIM master key file ${path} does not exist`);
  writeFileSync(path, `${Buffer.alloc(32, 7).toString("base64")}\n`);
  chmodSync(path, 0o644);
  expect(() => ensureMasterKeyFile(dir)).toThrow(MasterKeyError);
  expect(() => readMasterKeyFile(path)).toThrow(
    `the DKIM master key file ${path} may be read by others than its owner`,
  );
  writeFileSync(path, "short\n");
  chmodSync(path, 0o600);
  expect(() => ensureMasterKeyFile(dir)).toThrow(
    `the DKIM master key file ${path} must be the base64 of 32 random bytes`,
  );
  expect(() => readMasterKeyFile(dir)).toThrow(`cannot read the DKIM master key file ${dir}: EISDIR`);
});

test("derived keys: 32 bytes each, one per purpose and per master key, stable", () => {
  const master = MasterKey.generate();
  const other = MasterKey.generate();
  const purposes = ["return-path", "tracking", "plane-ticket"] as const;
  const keys = purposes.map((p) => master.derive(p).toString("hex"));
  expect(new Set(keys).size).toBe(3);
  for (const [i, p] of purposes.entries()) {
    expect(master.derive(p).length).toBe(32);
    expect(master.derive(p).toString("hex")).toBe(keys[i]!);
    expect(other.derive(p).toString("hex")).not.toBe(keys[i]!);
  }
});
