import { describe, expect, test } from "bun:test";
import emailAddresses from "email-addresses";
import fc from "fast-check";
import { isPlainMailbox, mailboxAddress, plainMailbox } from "./mailbox";

/** What the parser alone answers: the address of exactly one mailbox, or undefined. */
function parsed(input: string): string | undefined {
  const r = emailAddresses.parseOneAddress({ input, rfc6532: true, rejectTLD: true });
  return r?.type === "mailbox" ? r.address : undefined;
}

const ATEXT = [..."abcxyzABCXYZ0189!#$%&'*+-/=?^_`{|}~"];
const atom = fc.string({ unit: fc.constantFrom(...ATEXT), minLength: 1, maxLength: 8 });
const dotAtom = fc.array(atom, { minLength: 1, maxLength: 4 }).map((a) => a.join("."));
const domain = fc.array(atom, { minLength: 2, maxLength: 4 }).map((a) => a.join("."));
const addrSpec = fc.tuple(dotAtom, domain).map(([l, d]) => `${l}@${d}`);
const phrase = fc.array(atom, { minLength: 1, maxLength: 6 }).map((a) => a.join(" "));
const plainForm = fc.oneof(
  addrSpec,
  addrSpec.map((a) => `<${a}>`),
  fc.tuple(phrase, addrSpec).map(([p, a]) => `${p} <${a}>`),
);

describe("plainMailbox", () => {
  test("gives the parser's address for every plain form", () => {
    fc.assert(
      fc.property(plainForm, (input) => {
        expect(plainMailbox(input)).toBeDefined();
        expect(plainMailbox(input)).toBe(parsed(input)!);
      }),
      { numRuns: 2_000 },
    );
  });

  test("never answers where the parser would not, or otherwise", () => {
    // Inputs near the plain forms: their characters, and the ones that make other forms.
    const near = fc.string({
      unit: fc.constantFrom(..."ab.@<> ()\"\\,:;[]é-'", ...ATEXT.slice(0, 6)),
      maxLength: 30,
    });
    fc.assert(
      fc.property(
        fc.oneof(
          near,
          plainForm.map((p) => `${p} `),
          plainForm,
        ),
        (input) => {
          const fast = plainMailbox(input);
          if (fast !== undefined) expect(fast).toBe(parsed(input)!);
        },
      ),
      { numRuns: 5_000 },
    );
  });

  test("leaves every other form to the parser", () => {
    for (const input of [
      '"Quoted Name" <a@b.example>',
      "a@b.example (comment)",
      "Name  <a@b.example>", // two spaces
      "Jöhn <a@b.example>",
      "a@localhost",
      "a@[127.0.0.1]",
      "a..b@c.example",
      "group: a@b.example;",
      "a@b.example, c@d.example",
    ])
      expect(plainMailbox(input)).toBeUndefined();
  });
});

describe("mailboxAddress", () => {
  test("answers as the parser does, plain or not", () => {
    for (const input of [
      "a@b.example",
      "Some Person <some.one+tag@mail.b.example>",
      '"Quoted, Name" <a@b.example>',
      "Jöhn <jöhn@b.example>",
      "a@b.example (comment)",
      "a@localhost",
      "a@b.example, c@d.example",
      "not an address",
    ])
      expect(mailboxAddress(input)).toBe(parsed(input));
  });

  test("isPlainMailbox reads the value trimmed, and only strings", () => {
    expect(isPlainMailbox("  Name <a@b.example> ")).toBe(true);
    expect(isPlainMailbox("(c) a@b.example")).toBe(false);
    expect(isPlainMailbox(["a@b.example"])).toBe(false);
    expect(isPlainMailbox(undefined)).toBe(false);
  });
});
