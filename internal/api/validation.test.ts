import { afterAll, describe, expect, test } from "bun:test";
import { InvalidField } from "./invalid_field";
import { parseSendRequest } from "./send_request";
import { INLINE_CONTENT_CHARS, offloadedValidation, validatesInline } from "./validation";

const plain = { from: "Acme <no-reply@acme.example>", to: "jane@example.org", subject: "Hi", text: "Hello" };

describe("validatesInline", () => {
  test("a plain body, and what is not an object, stay on the event loop", () => {
    expect(validatesInline(plain)).toBe(true);
    expect(validatesInline({ ...plain, to: ["jane@example.org"], replyTo: "a@b.example", html: "<p>x</p>" })).toBe(
      true,
    );
    expect(validatesInline("not an object")).toBe(true);
    expect(validatesInline(null)).toBe(true);
  });

  test("what could be slow goes to a thread: Markdown, an address for the parser, large content", () => {
    expect(validatesInline({ ...plain, markdown: "*a" })).toBe(false);
    expect(validatesInline({ ...plain, from: '"Acme" <no-reply@acme.example>' })).toBe(false);
    expect(validatesInline({ ...plain, to: "jane@example.org (comment)" })).toBe(false);
    expect(validatesInline({ ...plain, replyTo: "Jöhn <j@b.example>" })).toBe(false);
    expect(validatesInline({ ...plain, to: 42 })).toBe(false);
    expect(validatesInline({ ...plain, text: "x".repeat(INLINE_CONTENT_CHARS) })).toBe(false);
  });
});

describe("offloadedValidation", () => {
  const validation = offloadedValidation({ workers: 1, timeoutMs: 2_000 });
  afterAll(() => validation.close());

  test("answers the same on the event loop and on a thread", async () => {
    const threaded = { ...plain, from: '"Acme" <no-reply@acme.example>' };
    for (const body of [plain, threaded]) {
      const got = await validation.validate("org", body);
      expect(got.email.fromAddress).toBe("no-reply@acme.example");
      expect(got).toEqual(parseSendRequest(body));
    }
  });

  test("a refusal names its field either way", async () => {
    for (const body of [
      { ...plain, subject: "" },
      { ...plain, subject: "", markdown: "*a" },
    ]) {
      const err = await validation.validate("org", body).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidField);
      expect((err as InvalidField).field).toBe("subject");
    }
  });
});
