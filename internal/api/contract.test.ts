// The checks compiled from the OpenAPI document: what they refuse, the field they name, and
// what they admit.
import { describe, expect, test } from "bun:test";
import { apiContracts } from "./contract";
import { InvalidField } from "./invalid_field";

const contracts = apiContracts();

/** The field a body is refused for, or "admitted". */
function bodyVerdict(operation: string, body: unknown): string {
  try {
    contracts.get(operation)!.body(body);
    return "admitted";
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return err.field;
  }
}

function queryVerdict(operation: string, params: string[], query: string): string {
  try {
    contracts.get(operation)!.parameters(params, new URLSearchParams(query));
    return "admitted";
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return err.field;
  }
}

const send = { from: "Acme <no-reply@acme.example>", to: "ann@dest.example", subject: "Hi", text: "t" };

describe("a send body", () => {
  test.each([
    ["a typical send", send, "admitted"],
    ["to as a list of one", { ...send, to: ["ann@dest.example"] }, "admitted"],
    ["a quoted display name", { ...send, from: '"Acme, Inc." <a@acme.example>' }, "admitted"],
    ["an empty html beside text", { ...send, html: "" }, "admitted"],
    ["an unknown field", { ...send, form: "x" }, "form"],
    ["a from that is no address", { ...send, from: "nobody" }, "from"],
    ["two recipients", { ...send, to: ["a@dest.example", "b@dest.example"] }, "to"],
    ["no html, text or markdown", { ...send, text: undefined }, "html"],
    ["only empty parts", { ...send, text: "", html: "" }, "html"],
    ["markdown with html", { ...send, html: "<p>x</p>", markdown: "x" }, "markdown"],
    ["a blank subject", { ...send, subject: "  " }, "subject"],
    ["a two-line subject", { ...send, subject: "a\nb" }, "subject"],
    ["a header off the allow-list", { ...send, headers: { "Content-Type": "x" } }, "headers.Content-Type"],
    ["an allowed header in any case", { ...send, headers: { "list-ID": "x" } }, "admitted"],
    ["a two-line header value", { ...send, headers: { "X-A": "a\r\nb" } }, "headers.X-A"],
    ["a null optional field", { ...send, lane: null }, "lane"],
  ])("%s", (_, body, verdict) => {
    expect(bodyVerdict("POST /api/v1/emails", body)).toBe(verdict);
  });
});

test("the fuzzer's findings: nulls, unknown fields inside a trigger, an empty cursor", () => {
  expect(bodyVerdict("POST /api/v1/subscribers", { email: "a@x.example", triggerWorkflows: null })).toBe(
    "triggerWorkflows",
  );
  expect(
    bodyVerdict("POST /api/v1/subscribers/batch", { subscribers: [{ email: "a@x.example" }], triggerWorkflows: null }),
  ).toBe("triggerWorkflows");
  const workflow = { name: "w", trigger: { type: "subscriber.created", extra: 1 }, steps: [] };
  expect(bodyVerdict("POST /api/v1/workflows", workflow)).toBe("trigger.extra");
  expect(queryVerdict("GET /api/v1/webhooks", [], "cursor=")).toBe("cursor");
});

test("a batch item that is not an upsert fails alone, in its result: the batch is admitted", () => {
  expect(bodyVerdict("POST /api/v1/subscribers/batch", { subscribers: [{ email: "not an email" }, null] })).toBe(
    "admitted",
  );
});

test("query and path values are read as their schemas' types", () => {
  expect(queryVerdict("GET /api/v1/subscribers", [], "limit=5")).toBe("admitted");
  expect(queryVerdict("GET /api/v1/subscribers", [], "limit=5.5")).toBe("limit");
  expect(queryVerdict("GET /api/v1/subscribers", [], "limit=101")).toBe("limit");
  expect(queryVerdict("GET /api/v1/emails/{id}", ["msg_5f1d2c3b4a5968778695a4b3"], "")).toBe("admitted");
  expect(queryVerdict("GET /api/v1/emails/{id}", ["msg_1"], "")).toBe("id");
  expect(queryVerdict("GET /api/v1/subscribers/{id}", ["Kim%40Aud.Example"], "")).toBe("admitted");
});

test("a subscriber's name is one line, a field's string at most 4096 characters", () => {
  expect(bodyVerdict("POST /api/v1/subscribers", { email: " Kim@X.Example ", name: "Kim" })).toBe("admitted");
  expect(bodyVerdict("POST /api/v1/subscribers", { email: "k@x.example", name: "a\nb" })).toBe("name");
  expect(bodyVerdict("POST /api/v1/subscribers", { email: "k@x.example", fields: { a: "x".repeat(4097) } })).toBe(
    "fields.a",
  );
});

test("a length refused by the document reads as the API's own checks read", () => {
  const reason = (operation: string, body: unknown) => {
    try {
      contracts.get(operation)!.body(body);
    } catch (err) {
      if (err instanceof InvalidField) return err.message;
      throw err;
    }
    return "admitted";
  };
  expect(reason("POST /api/v1/emails", { ...send, subject: "s".repeat(999) })).toBe(
    "subject: must be at most 998 characters",
  );
});
