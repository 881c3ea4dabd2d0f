// Every example the document gives is valid against its own schema, checked by the validator the
// API checks requests with: an example cannot drift from what the API accepts and answers. And
// by a second engine, not JavaScript's, as a client in another language reads the document.
import { expect, test } from "bun:test";
import { pythonValidate } from "../../testkit/pyschema";
import { documentRef, documentValidator } from "../contract";
import { openApiDocument } from "./document";

type Obj = Record<string, unknown>;

interface Found {
  where: string[];
  value: unknown;
  /** The path of the schema it must satisfy. */
  schema: string[];
}

/**
 * Every example in the document: a media type's, a parameter's or a header's `example` (against
 * its sibling `schema`) and a schema's `examples`.
 */
function examplesOf(node: unknown, where: string[] = []): Found[] {
  if (node === null || typeof node !== "object") return [];
  const o = node as Obj;
  const found: Found[] = [];
  if ("example" in o && o.schema) found.push({ where, value: o.example, schema: [...where, "schema"] });
  if (Array.isArray(o.examples)) found.push(...o.examples.map((value) => ({ where, value, schema: where })));
  for (const [key, child] of Object.entries(o)) {
    if (key !== "example" && key !== "examples") found.push(...examplesOf(child, [...where, key]));
  }
  return found;
}

/** The examples that fail their schemas, each with Ajv's first complaint. */
function invalidExamples(doc: Obj): string[] {
  const ajv = documentValidator(doc, false);
  return examplesOf(doc).flatMap(({ where, value, schema }) => {
    const validate = ajv.compile(documentRef(...schema));
    if (validate(value)) return [];
    const e = validate.errors!.at(-1)!;
    return [`${where.join(" ")}: ${e.instancePath} ${e.message}`];
  });
}

test("every example in the document is valid against its schema", () => {
  const doc = openApiDocument();
  expect(examplesOf(doc).length).toBeGreaterThan(80);
  expect(invalidExamples(doc)).toEqual([]);
});

/** The examples that fail their schemas under Python's jsonschema, each with its complaints. */
async function invalidForPython(doc: Obj): Promise<string[]> {
  const found = examplesOf(doc);
  const errors = await pythonValidate(
    doc,
    found.map((f) => ({ at: f.schema, value: f.value })),
  );
  return found.flatMap((f, i) => errors[i]!.map((e) => `${f.where.join(" ")}: ${e}`));
}

test("every example in the document is valid against its schema under Python's jsonschema", async () => {
  expect(await invalidForPython(openApiDocument())).toEqual([]);
});

test("an example that Python's jsonschema refuses is found: a pattern, a format, a reference", async () => {
  // A copy: the document's examples are the modules' own objects.
  const doc = structuredClone(openApiDocument()) as { paths: Record<string, Record<string, Obj>> };
  const send = doc.paths["/api/v1/emails"]!.post as { requestBody: { content: Record<string, Obj> } };
  const example = send.requestBody.content["application/json"]!.example as Obj;
  example.to = "nobody";
  example.from = "Ann ann@acme.example";
  const read = doc.paths["/api/v1/emails/{id}"]!.get as { responses: Record<string, { content: Record<string, Obj> }> };
  (read.responses["200"]!.content["application/json"]!.example as Obj).createdAt = "2026-02-30T10:00:00Z";
  expect(await invalidForPython(doc)).toEqual([
    expect.stringMatching(
      /^paths \/api\/v1\/emails post requestBody content application\/json: from: .* does not match /,
    ),
    expect.stringMatching(
      /^paths \/api\/v1\/emails post requestBody content application\/json: to: .* is not valid under any of the given schemas$/,
    ),
    expect.stringMatching(
      /^paths \/api\/v1\/emails\/\{id\} get responses 200 content application\/json: createdAt: .* is not a 'date-time'$/,
    ),
  ]);
});

test("an example that its schema refuses is found", () => {
  const doc = openApiDocument() as { paths: Record<string, Record<string, Obj>> };
  const send = doc.paths["/api/v1/emails"]!.post as { requestBody: { content: Record<string, Obj> } };
  (send.requestBody.content["application/json"]!.example as Obj).to = "nobody";
  expect(invalidExamples(doc)).toEqual([
    "paths /api/v1/emails post requestBody content application/json: /to must match exactly one schema in oneOf",
  ]);
});

test("every operation shows a request (when it takes a body or a query) and an answer", () => {
  const doc = openApiDocument() as { paths: Record<string, Record<string, Obj>> };
  const missing: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      const requestMedia = ((op.requestBody as Obj | undefined)?.content as Obj | undefined)?.["application/json"];
      if (requestMedia && (requestMedia as Obj).example === undefined) missing.push(`${where}: request body`);
      for (const p of (op.parameters as Obj[] | undefined) ?? []) {
        if ((p.in === "query" || p.in === "path") && p.example === undefined)
          missing.push(`${where}: parameter ${p.name}`);
      }
      const answered = Object.values(op.responses as Obj).some(
        (r) => ((r as Obj).content as Record<string, Obj> | undefined)?.["application/json"]?.example !== undefined,
      );
      if (!answered) missing.push(`${where}: an answer`);
    }
  }
  expect(missing).toEqual([]);
});

test("list answers name their items' schema", () => {
  const doc = openApiDocument() as { paths: Record<string, Record<string, Obj>> };
  const bare: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      for (const [status, r] of Object.entries(op.responses as Record<string, Obj>)) {
        const schema = (r.content as Record<string, Obj> | undefined)?.["application/json"]?.schema as Obj | undefined;
        const items = ((schema?.properties as Obj | undefined)?.data as Obj | undefined)?.items as Obj | undefined;
        if (items && typeof items.$ref !== "string") bare.push(`${method.toUpperCase()} ${path} ${status}`);
      }
    }
  }
  expect(bare).toEqual([]);
});
