// Secret files alone: made once, mode 0600 whatever the umask, read back; never replaced; one
// that others may read is refused.
import { expect, test } from "bun:test";
import { chmodSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../testkit/testkit";
import { ensureSecretFile, readSecretFile, SecretFileError } from "./secretfile";

test("made once with mode 0600 (its new folder 0700), then read back, never made again", () => {
  const dir = join(tempDir(), "data");
  const path = join(dir, "x.secret");
  const umask = process.umask(0);
  try {
    const first = ensureSecretFile(path, "the x", () => "one\n");
    expect(first).toEqual({ text: "one\n", created: true });
  } finally {
    process.umask(umask);
  }
  expect(statSync(path).mode & 0o777).toBe(0o600);
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  expect(ensureSecretFile(path, "the x", () => "two\n")).toEqual({ text: "one\n", created: false });
  expect(readdirSync(dir)).toEqual(["x.secret"]);
  expect(readSecretFile(join(dir, "none"), "the x")).toBeUndefined();
});

test("a file that others than its owner may read is refused, naming the file and the fix", () => {
  const path = join(tempDir(), "x.secret");
  writeFileSync(path, "loose\n");
  chmodSync(path, 0o640);
  expect(() => readSecretFile(path, "the x")).toThrow(
    new SecretFileError(`the x ${path} may be read by others than its owner (mode 0640): chmod 600 it`),
  );
  expect(() => ensureSecretFile(path, "the x", () => "new\n")).toThrow(SecretFileError);
  expect(() => readSecretFile(join(path, ".."), "the x")).toThrow("EISDIR");
});
