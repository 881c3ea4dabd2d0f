// The document's patterns are read alike by every engine: each is within JSON Schema's portable
// subset, Python's re compiles it and matches the very strings JavaScript's does, and where a
// format of the document's own says more, the pattern admits every value of the format and, in
// ASCII, only those.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { pythonPatterns } from "../../testkit/pyschema";
import { openApiDocument } from "./document";
import { API_FORMATS, WHITE_SPACE } from "./patterns";

type Obj = Record<string, unknown>;
const SEED = 20_261_130;

interface Patterned {
  where: string;
  schema: Obj;
  pattern: string;
}

/** Every schema of the document that has a pattern (in a `properties` map, the names are not keywords). */
function patternedSchemas(node: unknown, where = ""): Patterned[] {
  if (node === null || typeof node !== "object") return [];
  if (Array.isArray(node)) return node.flatMap((v, i) => patternedSchemas(v, `${where}/${i}`));
  const o = node as Obj;
  const own = typeof o.pattern === "string" ? [{ where, schema: o, pattern: o.pattern }] : [];
  return [...own, ...Object.entries(o).flatMap(([k, v]) => patternedSchemas(v, `${where}/${k}`))];
}

/** Every string of the document's examples. */
function exampleStrings(node: unknown, inExample = false): string[] {
  if (typeof node === "string") return inExample ? [node] : [];
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([k, v]) => exampleStrings(v, inExample || k === "example" || k === "examples"));
}

const SYNTAX = "^$\\.*+?()[]{}|/-";

/** What in a pattern is beyond JSON Schema's portable subset (as patterns.ts states it); empty when nothing. */
function beyondPortable(pattern: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\") {
      const next = pattern[i + 1] ?? "";
      if (next === "x" && /^[0-9A-Fa-f]{2}$/.test(pattern.slice(i + 2, i + 4))) i += 3;
      else if (SYNTAX.includes(next) || "tnr".includes(next)) i++;
      else found.push(pattern.slice(i, i + 2));
    } else if (c === "(" && pattern[i + 1] === "?") found.push(pattern.slice(i, i + 3));
  }
  return found;
}

const doc = openApiDocument();
const patterned = patternedSchemas(doc);
const patterns = [...new Set(patterned.map((p) => p.pattern))];

/** Characters where engines differ: white space beyond ASCII, controls \s takes in one engine, a letter lower-casing lengthens, an astral one. */
const TRICKY = [
  "\u00A0",
  "\x1C",
  "\x85",
  "\uFEFF",
  "\u2028",
  "\t",
  " ",
  "İ",
  "é",
  "😀",
  "@",
  ".",
  "-",
  "_",
  "x",
  "0",
  ":",
];

/** Strings to hold a pattern to: its own matches (and the format's, when the schema has one), each also broken by a tricky character, and every example string. */
function probesOf(pattern: string, examples: string[]): string[] {
  const formats = patterned
    .filter((p) => p.pattern === pattern && API_FORMATS[p.schema.format as string])
    .map((p) => API_FORMATS[p.schema.format as string]!.regex);
  const matching = [new RegExp(pattern, "u"), ...formats].flatMap((r) =>
    fc.sample(fc.stringMatching(r), { numRuns: 40, seed: SEED }),
  );
  const broken = fc.sample(
    fc.tuple(fc.constantFrom(...matching), fc.nat(), fc.constantFrom(...TRICKY), fc.constantFrom("insert", "replace")),
    { numRuns: 120, seed: SEED },
  );
  return [
    ...matching,
    ...broken.map(([s, at, c, how]) => {
      const i = s.length ? at % s.length : 0;
      return s.slice(0, i) + c + s.slice(how === "insert" ? i : i + 1);
    }),
    ...TRICKY,
    "",
    ...examples,
    // Python's $ matches before a last newline too (JavaScript's only at the end): a difference
    // no pattern can avoid, and one that only admits more. Not held here.
  ].filter((s) => !s.endsWith("\n"));
}

/** Where Python's re and JavaScript's (with the u flag, as Ajv compiles patterns) disagree on the probes. */
async function disagreements(probes: Map<string, string[]>): Promise<string[]> {
  const python = await pythonPatterns(probes);
  return [...probes].flatMap(([pattern, strings]) => {
    const result = python.get(pattern)!;
    if ("error" in result) return [`${pattern}: Python's re refuses it: ${result.error}`];
    const js = new RegExp(pattern, "u");
    return strings.flatMap((s, i) =>
      js.test(s) === result.matches[i]
        ? []
        : [`${pattern}: ${JSON.stringify(s)}: JavaScript ${js.test(s)}, Python ${result.matches[i]}`],
    );
  });
}

describe("the document's patterns", () => {
  test("are within JSON Schema's portable subset", () => {
    expect(patterns.length).toBeGreaterThan(15);
    expect(patterns.flatMap((p) => beyondPortable(p).map((b) => `${b} in ${p}`))).toEqual([]);
  });

  test("what is beyond the portable subset is found", () => {
    expect(
      ["^[\\p{L}]$", "(?=[^@]{1,64}@)a", "^(?:a)(?!b)$", "\\S", "(a)\\1", "[\\d]", "^\\x2Fa\\.b[\\-\\]]\\t$"].map(
        beyondPortable,
      ),
    ).toEqual([["\\p"], ["(?="], ["(?:", "(?!"], ["\\S"], ["\\1"], ["\\d"], []]);
  });

  test("are compiled by Python's re and match what JavaScript's matches", async () => {
    const examples = exampleStrings(doc);
    expect(examples.length).toBeGreaterThan(100);
    const probes = new Map(patterns.map((p) => [p, probesOf(p, examples)]));
    expect(await disagreements(probes)).toEqual([]);
  }, 60_000);

  test("a pattern the engines read apart is found", async () => {
    const found = await disagreements(
      new Map([
        ["^[\\p{L}]+$", ["a"]],
        ["\\S", ["\x1C", "\uFEFF", "a"]],
      ]),
    );
    expect(found).toEqual([
      expect.stringMatching(/^\^\[\\p\{L\}\]\+\$: Python's re refuses it: error: bad escape \\p/),
      '\\S: "\\u001c": JavaScript true, Python false',
      '\\S: "\uFEFF": JavaScript false, Python true',
    ]);
  });

  test("WHITE_SPACE is JavaScript's \\s, character for character", () => {
    const spelled = new RegExp(`^[${WHITE_SPACE}]$`, "u");
    const differ: string[] = [];
    for (let c = 0; c <= 0xffff; c++) {
      const s = String.fromCharCode(c);
      if (/^\s$/u.test(s) !== spelled.test(s)) differ.push(c.toString(16));
    }
    expect(differ).toEqual([]);
  });
});

describe("a pattern beside a format of the document's own", () => {
  const beside = patterned.filter((p) => API_FORMATS[p.schema.format as string]);

  test("every such schema says so in its description", () => {
    expect(beside.length).toBeGreaterThan(5);
    expect(
      beside.filter((p) => !String(p.schema.description).includes(`\`${p.schema.format}\``)).map((p) => p.where),
    ).toEqual([]);
  });

  test.each(Object.keys(API_FORMATS).map((f) => [f]))(
    "%s: the pattern admits every value of the format, and in ASCII only those",
    (format) => {
      const schemas = beside.filter((p) => p.schema.format === format);
      expect(schemas.length).toBeGreaterThan(0);
      const { regex } = API_FORMATS[format]!;
      const values = fc.sample(fc.stringMatching(regex), { numRuns: 300, seed: SEED });
      expect(values.filter((v) => /[^\x00-\x7F]/.test(v)).length).toBeGreaterThan(30);
      for (const { where, pattern } of schemas) {
        const portable = new RegExp(pattern, "u");
        expect({ where, refused: values.filter((v) => !portable.test(v)) }).toEqual({ where, refused: [] });
        const ascii = fc
          .sample(fc.stringMatching(portable), { numRuns: 1_500, seed: SEED })
          .filter((v) => !/[^\x00-\x7F]/.test(v));
        expect(ascii.length).toBeGreaterThan(30);
        expect({ where, beyondFormat: ascii.filter((v) => !regex.test(v)) }).toEqual({ where, beyondFormat: [] });
      }
    },
    30_000,
  );
});
