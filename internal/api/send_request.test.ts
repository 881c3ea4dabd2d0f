import { describe, expect, test } from "bun:test";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { InvalidField } from "./invalid_field";
import { MAX_RENDERED_HTML, parseSendRequest } from "./send_request";

const base = { from: "Acme <hello@acme.example>", to: "jane@example.org", subject: "Your code", text: "123456" };

describe("parseSendRequest", () => {
  test("a minimal request", () => {
    const { lane, email } = parseSendRequest(base);
    expect(lane).toBe(Lane.TRANSACTIONAL);
    expect(email).toMatchObject({
      from: "Acme <hello@acme.example>",
      fromAddress: "hello@acme.example",
      toAddress: "jane@example.org",
      subject: "Your code",
      text: "123456",
      html: "",
    });
    expect(email.trackOpens || email.trackClicks).toBe(false);
  });

  test("markdown is rendered to HTML and kept as the text part", () => {
    const { email } = parseSendRequest({ ...base, text: undefined, markdown: "Hello **Jane**" });
    expect(email.html).toBe("<p>Hello <strong>Jane</strong></p>\n");
    expect(email.text).toBe("Hello **Jane**");
  });

  test("Markdown that renders to more than 2 MB of HTML is refused", () => {
    expect(() => parseSendRequest({ ...base, text: undefined, markdown: "*a".repeat(400_000) })).toThrow(
      new InvalidField(
        "markdown",
        `renders to more than ${MAX_RENDERED_HTML} characters of HTML; shorten it or send html`,
      ),
    );
    expect(
      parseSendRequest({ ...base, text: undefined, markdown: "*a".repeat(1_000) }).email.html.length,
    ).toBeGreaterThan(2_000);
  });

  test("all fields", () => {
    const { lane, email } = parseSendRequest({
      ...base,
      to: ["Jane Doe <Jane+news@Example.org>"],
      html: "<p>x</p>",
      replyTo: "support@acme.example",
      headers: { "X-Campaign": "spring" },
      tags: ["welcome", "v2"],
      tracking: { opens: true, clicks: false },
      lane: "bulk",
    });
    expect(lane).toBe(Lane.BULK);
    expect(email).toMatchObject({
      toAddress: "Jane+news@Example.org",
      replyTo: "support@acme.example",
      headers: { "X-Campaign": "spring" },
      tags: ["welcome", "v2"],
      trackOpens: true,
    });
  });

  test("the fingerprint follows the content, not the JSON spelling", () => {
    const reordered = { text: base.text, subject: base.subject, to: base.to, from: base.from };
    expect(parseSendRequest(base).fingerprint).toBe(parseSendRequest(reordered).fingerprint);
    expect(parseSendRequest(base).fingerprint).not.toBe(parseSendRequest({ ...base, text: "654321" }).fingerprint);
  });

  test.each([
    ["not an object", [], "body"],
    ["an unknown field", { ...base, form: "x" }, "form"],
    ["no from", { ...base, from: undefined }, "from"],
    ["a from that is not an address", { ...base, from: "acme" }, "from"],
    ["a from with a line break", { ...base, from: "a@b.example\r\nBcc: x@y.example" }, "from"],
    ["a group as recipient", { ...base, to: "friends: a@b.example, c@d.example;" }, "to"],
    ["two recipients", { ...base, to: ["a@b.example", "c@d.example"] }, "to"],
    ["a recipient without a domain dot", { ...base, to: "root@localhost" }, "to"],
    ["no subject", { ...base, subject: " " }, "subject"],
    ["a subject with a line break", { ...base, subject: "a\nb" }, "subject"],
    ["no body", { ...base, text: undefined }, "html"],
    ["markdown with html", { ...base, markdown: "x", html: "<p>x</p>" }, "markdown"],
    ["a reserved header", { ...base, headers: { Subject: "x" } }, "headers.Subject"],
    ["a header with a line break", { ...base, headers: { "X-A": "a\r\nb" } }, "headers.X-A"],
    ["a bad header name", { ...base, headers: { "X A": "a" } }, "headers.X A"],
    ["a bad tag", { ...base, tags: ["a b"] }, "tags"],
    ["too many tags", { ...base, tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, "tags"],
    ["a bad tracking flag", { ...base, tracking: { opens: "yes" } }, "tracking.opens"],
    ["an unknown lane", { ...base, lane: "priority" }, "lane"],
  ])("refuses %s", (_, body, field) => {
    expect(() => parseSendRequest(body)).toThrow(InvalidField);
    try {
      parseSendRequest(body);
    } catch (err) {
      expect((err as InvalidField).field).toBe(field);
    }
  });
});
