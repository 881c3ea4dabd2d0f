import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { hashToken, isWellFormed, newToken } from "./token";

test("a token's hash is the hex SHA-256 of its text, the key the stores already hold", () => {
  for (const token of [newToken(), newToken(), `mc_${"a".repeat(43)}`]) {
    expect(isWellFormed(token)).toBe(true);
    expect(hashToken(token)).toBe(createHash("sha256").update(token).digest("hex"));
  }
  expect(hashToken("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
});
