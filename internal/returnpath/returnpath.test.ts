import { expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { newMessageId } from "../mail/identity";
import { isReturnPathSubdomain, parseReturnPath, returnPathFor } from "./returnpath";

const key = randomBytes(32);
const ID = "msg_5f1d2c3b4a5968778695a4b3";

function notOk(address: string, k: Uint8Array = key) {
  const r = parseReturnPath(address, k);
  if (r.ok) throw new Error(`${address} parsed`);
  return r;
}

test("the address: the message id and a 16-character HMAC at bounces.<from domain>", () => {
  const address = returnPathFor(ID, "Example.com", key);
  expect(address).toMatch(/^msg_5f1d2c3b4a5968778695a4b3-[a-z2-7]{16}@bounces\.example\.com$/);
  expect(address.split("@")[0]!.length).toBeLessThanOrEqual(64);
  expect(parseReturnPath(address, key)).toEqual({ ok: true, messageId: ID, domain: "bounces.example.com" });
});

test("the subdomain is the one given", () => {
  const address = returnPathFor(ID, "example.com", key, "rp.mail");
  expect(address.endsWith("@rp.mail.example.com")).toBe(true);
  expect(parseReturnPath(address, key)).toMatchObject({ ok: true, messageId: ID, domain: "rp.mail.example.com" });
});

test("an MTA that changes the case of the address changes nothing", () => {
  const address = returnPathFor(ID, "example.com", key);
  expect(address).toBe(address.toLowerCase());
  expect(parseReturnPath(address.toUpperCase(), key)).toMatchObject({ ok: true, messageId: ID });
  // Spaces around it and the root's dot after the domain are not part of it.
  expect(parseReturnPath(` ${address}. `, key)).toMatchObject({ ok: true, messageId: ID });
});

test("the ids the platform makes fit, and come back", () => {
  for (let i = 0; i < 100; i++) {
    const id = newMessageId();
    expect(parseReturnPath(returnPathFor(id, "example.com", key), key)).toMatchObject({ ok: true, messageId: id });
  }
});

test("forged: another id, another HMAC, another key, another domain", () => {
  const address = returnPathFor(ID, "example.com", key);
  const [local, domain] = address.split("@") as [string, string];
  const otherId = local.replace("msg_5f1d", "msg_5f1e");
  const mac = local.slice(-16);
  const otherMac = local.slice(0, -1) + (mac.endsWith("a") ? "b" : "a");
  for (const forged of [`${otherId}@${domain}`, `${otherMac}@${domain}`, `${local}@bounces.example.org`]) {
    expect(notOk(forged)).toMatchObject({ code: "forged" });
  }
  expect(notOk(address, randomBytes(32))).toEqual({
    ok: false,
    code: "forged",
    reason: `"${address}" does not carry our HMAC for its message and domain: forged, altered, or made under another key`,
  });
});

test("not ours: addresses of other shapes", () => {
  for (const address of [
    "",
    "postmaster@bounces.example.com",
    "msg_5f1d2c3b4a5968778695a4b3@bounces.example.com",
    "msg_5f1d2c3b4a5968778695a4b3-abc@bounces.example.com",
    "msg_5f1d2c3b4a5968778695a4b3-aaaaaaaaaaaaaaa1@bounces.example.com",
    "no-at-sign",
    "@bounces.example.com",
    "msg_x-aaaaaaaaaaaaaaaa@",
  ]) {
    expect(notOk(address).code).toBe("not-ours");
  }
  expect(notOk("postmaster@x.org").reason).toBe('"postmaster@x.org" is not a return path of ours');
  expect(notOk("nothing").reason).toBe('"nothing" is not an address');
});

test("any one character changed is refused (property)", () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 12, maxLength: 12 }),
      fc.domain(),
      fc.nat(),
      fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789_-.@"),
      (bytes, domain, at, char) => {
        const id = `msg_${Buffer.from(bytes).toString("hex")}`;
        let address: string;
        try {
          address = returnPathFor(id, domain, key);
        } catch {
          return; // a generated domain too long for the subdomain in front of it
        }
        expect(parseReturnPath(address, key)).toMatchObject({ ok: true, messageId: id });
        const i = at % address.length;
        const changed = address.slice(0, i) + char + address.slice(i + 1);
        if (changed.toLowerCase() === address || changed.toLowerCase() === `${address}.`) return;
        expect(parseReturnPath(changed, key).ok).toBe(false);
      },
    ),
    { numRuns: 500 },
  );
});

test("bad input to returnPathFor is refused, not encoded", () => {
  expect(() => returnPathFor("MSG_ABC", "example.com", key)).toThrow('"MSG_ABC" is not a message id');
  expect(() => returnPathFor("msg_abc", "exa mple.com", key)).toThrow("is not a domain name");
  expect(() => returnPathFor("msg_abc", "example.com", key, "-bad")).toThrow("is not a domain name");
  expect(() => returnPathFor(`msg_${"a".repeat(44)}`, "example.com", key)).toThrow("too long for a return path");
  expect(() => returnPathFor("msg_abc", "example.com", randomBytes(8))).toThrow("at least 16 bytes");
  expect(() => parseReturnPath("x@y", randomBytes(8))).toThrow("at least 16 bytes");
});

test("RETURN_PATH_SUBDOMAIN: DNS labels", () => {
  for (const ok of ["bounces", "rp.mail", "Bounces", "b-1"]) expect(isReturnPathSubdomain(ok)).toBe(true);
  for (const bad of ["", ".bounces", "bounces.", "-b", "b_1", "a..b", "x".repeat(64), "bo unces"])
    expect(isReturnPathSubdomain(bad)).toBe(false);
});
