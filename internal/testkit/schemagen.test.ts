// The generator the conformance check draws its requests from: what it makes valid is what the
// document admits, and what a mutation makes is what the document refuses.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { documentRef, documentValidator } from "../api/contract";
import { openApiDocument } from "../api/openapi/document";
import { API_FORMATS } from "../api/openapi/patterns";
import { MUTATIONS, mutate, SchemaArbitraries } from "./schemagen";

type Obj = Record<string, unknown>;

const doc = openApiDocument();
const bodies = documentValidator(doc, false);
const strings = documentValidator(doc, true);
const schemas = new SchemaArbitraries(doc, (schema) => bodies.compile(schema), API_FORMATS);
const SEED = 20_261_122;

/** Every operation's JSON body schema, with the document's check of it. */
const requestBodies = Object.entries(doc.paths as Record<string, Record<string, Obj>>).flatMap(([template, item]) =>
  Object.entries(item).flatMap(([method, op]) => {
    const media = ((op.requestBody as Obj | undefined)?.content as Obj | undefined)?.["application/json"] as
      | Obj
      | undefined;
    if (!media) return [];
    const at = ["paths", template, method, "requestBody", "content", "application/json", "schema"];
    return [{ name: `${method.toUpperCase()} ${template}`, media, admits: bodies.compile(documentRef(...at)) }];
  }),
);

describe("values generated for the API's document are ones it admits", () => {
  test.each(requestBodies.map((b) => [b.name, b] as const))("the body of %s", (_, { media, admits }) => {
    const refused = fc.sample(schemas.of(media.schema), { numRuns: 100, seed: SEED }).filter((v) => !admits(v));
    expect(refused).toEqual([]);
  });

  test("every path and query parameter, as the string it travels as", () => {
    const refused = Object.values(doc.paths as Record<string, Record<string, Obj>>)
      .flatMap((item) => Object.values(item).flatMap((op) => (op.parameters as Obj[] | undefined) ?? []))
      .filter((p) => p.in === "path" || p.in === "query")
      .flatMap((p) => {
        const admits = strings.compile({ type: "object", properties: { v: p.schema } });
        return fc
          .sample(schemas.of(p.schema), { numRuns: 50, seed: SEED })
          .map((v) => (typeof v === "string" ? v : JSON.stringify(v)))
          .filter((v) => !admits({ v }))
          .map((v) => `${p.name}: ${v}`);
      });
    expect(refused).toEqual([]);
  });
});

describe("what was made valid by chance", () => {
  // A send with html beside markdown: the `not` of its parts, which values were not held to.
  test("a `not` is held", () => {
    const schema = {
      type: "object",
      properties: { a: { type: "boolean" }, b: { type: "boolean" } },
      not: { required: ["a", "b"] },
    };
    const values = fc.sample(schemas.of(schema), { numRuns: 200, seed: SEED }) as Obj[];
    expect(values.filter((v) => "a" in v && "b" in v)).toEqual([]);
    expect(values.some((v) => "a" in v) && values.some((v) => "b" in v)).toBe(true);
  });

  // A tag's name and a subscriber's address: generated from the portable pattern, beyond ASCII
  // they were mostly characters the format refuses, and filtered out to none.
  test("a format of the document's own is generated from its regular expression, and held to the pattern", () => {
    const schema = { type: "string", format: "tag-name", pattern: "^[^0-9]+$", allOf: [{ pattern: "^[^a]" }] };
    const admits = bodies.compile(schema);
    const values = fc.sample(schemas.of(schema), { numRuns: 200, seed: SEED }) as string[];
    expect(values.filter((v) => !admits(v))).toEqual([]);
    expect(values.filter((v) => /[^\x00-\x7F]/.test(v)).length).toBeGreaterThan(50);
  });

  // A webhook's URL: a pattern for its start, and format uri for the rest.
  test("a pattern's match is held to the schema's format and lengths", () => {
    const schema = { type: "string", format: "uri", pattern: "^https://a\\.example/", maxLength: 30 };
    const admits = bodies.compile(schema);
    expect(fc.sample(schemas.of(schema), { numRuns: 200, seed: SEED }).filter((v) => !admits(v))).toEqual([]);
  });
});

describe("a mutation breaks what it mutates", () => {
  // A batch's items are any value (each item is checked alone): a mutation that struck inside one
  // left the body valid, and an operation could go through a run with no invalid request.
  const batch = requestBodies.find((b) => b.name === "POST /api/v1/subscribers/batch")!;

  test("one that struck where the schema takes any value gives way to one that breaks it", () => {
    const body = { subscribers: [{ email: "a@x.example", tags: ["t"] }] };
    const inItem = { at: 2, kind: "replace" as const, value: 0 }; // depth 2: the item itself
    expect(batch.admits(mutate(body, inItem, () => false))).toBe(true);
    expect(batch.admits(mutate(body, inItem, (v) => batch.admits(v) as boolean))).toBe(false);
  });

  test("every mutation of every body example is refused by the document", () => {
    const admitted = requestBodies.flatMap(({ name, media, admits }) =>
      fc
        .sample(MUTATIONS, { numRuns: 100, seed: SEED })
        .map((m) => mutate(media.example, m, (v) => admits(v) as boolean))
        .filter((v) => admits(v))
        .map((v) => `${name}: ${JSON.stringify(v)}`),
    );
    expect(admitted).toEqual([]);
  });

  test("with nothing that breaks the value, the mutation as drawn", () => {
    expect(mutate({ a: [1] }, { at: 1, kind: "remove", value: null }, () => true)).toEqual({});
  });
});
