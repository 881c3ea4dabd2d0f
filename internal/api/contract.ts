import Ajv2020, { type ErrorObject, type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { InvalidField } from "./invalid_field";
import { openApiDocument } from "./openapi/document";
import { API_FORMATS } from "./openapi/patterns";

// The OpenAPI document decides what the API accepts: each operation's path parameters, query
// string and JSON body are checked against the document's own schemas before its handler runs
// its business rules. Ajv (the most used JSON Schema validator for JavaScript, with the
// 2020-12 dialect OpenAPI 3.1 uses) compiles every check once, at start, into plain functions.

type Obj = Record<string, unknown>;

/** Where the document is registered with Ajv: its "#/components/..." references resolve in it. */
const DOCUMENT_ID = "https://mailcore.invalid/openapi.json";

/** What an operation of the document admits, as checks that throw InvalidField naming the field. */
export interface OperationContract {
  /** The path's captured parts (as sent, percent-encoded) and the query string. */
  parameters(params: readonly string[], query: URLSearchParams): void;
  /** A JSON body, already parsed. */
  body(value: unknown): void;
}

/** Errors that name the field in one of their params: which param, and what is wrong. */
const NAMED_BY_PARAM: Record<string, [param: string, reason: string]> = {
  required: ["missingProperty", "is required"],
  additionalProperties: ["additionalProperty", "is not a field of this endpoint"],
  propertyNames: ["propertyName", "is not an accepted name"],
  discriminator: ["tag", "is not one of the documented types"],
};

const requiredOf = (schema: unknown) => ((schema as Obj | undefined)?.required as string[] | undefined) ?? [];

/**
 * The field an error names, as the API writes it (`to`, `headers.X-Foo`, `subscribers[1].email`),
 * and what is wrong with it. The rules over several fields name the one a client most likely
 * meant: the first of "one of html, text or markdown", the last of "not markdown with html".
 */
function refusal(e: ErrorObject, root: string): InvalidField {
  const parts = e.instancePath
    .split("/")
    .slice(1)
    .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
  let reason = e.message ?? "is invalid";
  const byParam = NAMED_BY_PARAM[e.keyword];
  if (byParam) {
    parts.push(e.params[byParam[0]]);
    reason = byParam[1];
  }
  switch (e.keyword) {
    case "anyOf": {
      const names = (e.schema as unknown[]).map((branch) => requiredOf(branch)[0]);
      parts.push(names[0]!);
      reason = `one of ${names.join(", ")} is required, not empty`;
      break;
    }
    case "not": {
      const names = requiredOf(e.schema);
      // A `not` of the value itself (a URL's punycode label, a header name of ours).
      if (names.length === 0) {
        reason = "is not in the documented form";
        break;
      }
      parts.push(names.at(-1)!);
      reason = `cannot be combined with ${names.slice(0, -1).join(", ")}`;
      break;
    }
    // The portable pattern beside a format of the document's own admits a superset: either
    // refusal is the format's.
    case "pattern":
    case "format": {
      const format = API_FORMATS[(e.parentSchema as Obj | undefined)?.format as string];
      if (format) reason = format.refusal;
      else if (e.keyword === "pattern" && (e.schema as string).length > 40) reason = "is not in the documented form";
      break;
    }
    // In the words the API's own checks use ("subject: must be at most 998 characters").
    case "maxLength":
      reason = `must be at most ${e.params.limit} characters`;
      break;
    case "minLength":
      reason = e.params.limit === 1 ? "must not be empty" : `must be at least ${e.params.limit} characters`;
      break;
    case "maxItems":
      reason = `must hold at most ${e.params.limit} items`;
      break;
    case "minItems":
      reason = `must hold at least ${e.params.limit} item${e.params.limit === 1 ? "" : "s"}`;
      break;
  }
  const field = parts.length
    ? parts.reduce((name, part) => (/^\d+$/.test(part) ? `${name}[${part}]` : `${name}.${part}`))
    : root;
  return new InvalidField(field, reason);
}

function check(validate: ValidateFunction, root: string): (value: unknown) => void {
  return (value) => {
    // The last error is the outermost rule that failed (a oneOf, not the branch that came closest).
    if (!validate(value)) throw refusal(validate.errors!.at(-1)!, root);
  };
}

const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");

/**
 * An Ajv that holds `doc` under DOCUMENT_ID, so that `{$ref: DOCUMENT_ID#/...}` compiles any of its
 * schemas. `coerceTypes` reads strings as the types their schemas say (query and path values).
 */
export function documentValidator(doc: Obj, coerceTypes: boolean): Ajv2020 {
  // Ajv picks a discriminated branch by its `type` const, and refuses the mapping that says the
  // same to code generators.
  const withoutMappings = JSON.parse(JSON.stringify(doc), (key, value) =>
    key === "discriminator" && value?.mapping ? { propertyName: value.propertyName } : value,
  );
  // Not strict: the document's own keywords (example) are not validation keywords. Its
  // schemas are checked by the linter in CI, not again at every start. Lengths count UTF-16
  // units, as the API's own checks do, in constant time (code points take a walk over a 1 MB html).
  const ajv = new Ajv2020({
    unicode: false,
    // Ajv calls that option deprecated at every start; its other warnings are kept.
    logger: {
      log: console.log,
      error: console.error,
      warn: (...a) => /option unicode/.test(String(a[0])) || console.warn(...a),
    },
    strict: false,
    validateSchema: false,
    discriminator: true,
    verbose: true,
    coerceTypes,
    allErrors: false,
  });
  addFormats(ajv);
  for (const [name, format] of Object.entries(API_FORMATS))
    ajv.addFormat(name, format.accepts ? { type: "string", validate: format.accepts } : format.regex);
  ajv.addSchema(withoutMappings, DOCUMENT_ID);
  return ajv;
}

/** A reference to the schema at `parts` (a path of keys) in the document a documentValidator holds. */
export const documentRef = (...parts: string[]) => ({ $ref: `${DOCUMENT_ID}#/${pointer(...parts)}` });

/**
 * Compiles the checks of every operation of the document, keyed `METHOD template`
 * (`POST /api/v1/emails`). Query and path values are strings: they are read as the types
 * their schemas say (`limit=5` as the integer 5).
 */
export function operationContracts(doc: Obj): Map<string, OperationContract> {
  const bodies = documentValidator(doc, false);
  const parameters = documentValidator(doc, true);
  const contracts = new Map<string, OperationContract>();
  for (const [template, item] of Object.entries(doc.paths as Record<string, Obj>)) {
    for (const [method, op] of Object.entries(item) as [string, Obj][]) {
      const params = (op.parameters as Obj[] | undefined) ?? [];
      const inPath = params.filter((p) => p.in === "path");
      const inQuery = params.filter((p) => p.in === "query");
      const object = (list: Obj[]) =>
        parameters.compile({
          type: "object",
          properties: Object.fromEntries(list.map((p) => [p.name, p.schema])),
          required: list.filter((p) => p.required).map((p) => p.name),
        });
      const pathNames = template.match(/\{\w+\}/g)?.map((n) => n.slice(1, -1)) ?? [];
      const checkPath = inPath.length ? check(object(inPath), "path") : undefined;
      const checkQuery = inQuery.length ? check(object(inQuery), "query") : undefined;
      const queryNames = inQuery.map((p) => p.name as string);
      const content = ((op.requestBody as Obj | undefined)?.content as Obj | undefined)?.["application/json"];
      const checkBody = content
        ? check(
            bodies.compile(
              documentRef("paths", template, method, "requestBody", "content", "application/json", "schema"),
            ),
            "body",
          )
        : () => {};
      contracts.set(`${method.toUpperCase()} ${template}`, {
        parameters(values, query) {
          if (checkPath) {
            const given: Obj = {};
            pathNames.forEach((name, i) => {
              given[name] = safeDecode(values[i]!);
            });
            checkPath(given);
          }
          if (checkQuery) {
            const given: Obj = {};
            for (const name of queryNames) {
              const value = query.get(name);
              if (value !== null) given[name] = value;
            }
            checkQuery(given);
          }
        },
        body: checkBody,
      });
    }
  }
  return contracts;
}

let compiled: Map<string, OperationContract> | undefined;

/** The contracts of this API's own document: compiled on first use, shared by every handler of the process. */
export function apiContracts(): Map<string, OperationContract> {
  compiled ??= operationContracts(openApiDocument());
  return compiled;
}

/** A path segment as the client meant it; one that is not valid percent-encoding is checked as sent. */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
