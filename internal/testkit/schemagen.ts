// fast-check arbitraries from the JSON Schemas of an OpenAPI document: values a schema admits
// (what a pattern's match must also be, and a `not`, are held by filters; a pattern fast-check
// cannot generate from is left to the validator that classifies each value), and mutations that
// break them. The subset is what the API's document uses: type (and type lists), const, enum,
// pattern, formats (the document's own generated from their regular expressions), lengths,
// ranges, items, properties, required, additionalProperties, propertyNames, allOf, anyOf, oneOf,
// not, $ref, and `example`/`examples`, which are offered beside the generated values.
import fc from "fast-check";

type Obj = Record<string, unknown>;
type Schema = Obj;

/** Keywords whose values are lists that several merged schemas add up. */
const LISTS = new Set(["required", "patterns"]);

/** One schema from several (allOf, or a branch with the schema it is in): properties merged by name, patterns kept all. */
function merge(...schemas: Schema[]): Schema {
  const out: Schema = {};
  for (const s of schemas) {
    for (const [key, value] of Object.entries(s)) {
      if (key === "pattern") out.patterns = [...((out.patterns as string[]) ?? []), value as string];
      else if (LISTS.has(key)) out[key] = [...((out[key] as unknown[]) ?? []), ...(value as unknown[])];
      else if (key === "properties") {
        const props = { ...((out.properties as Obj) ?? {}) };
        for (const [name, p] of Object.entries(value as Obj))
          props[name] = name in props ? merge(props[name] as Schema, p as Schema) : p;
        out.properties = props;
      } else out[key] = value;
    }
  }
  return out;
}

const ISO_RANGE = { min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true };

/** The arbitraries of regular expressions, made once: one of Unicode classes takes fast-check a quarter of a second to make. */
const matchers = new Map<string, fc.Arbitrary<string> | null>();

/** Strings matching the regular expression; null if fast-check cannot generate from it. */
function matchingArbitrary(regex: RegExp): fc.Arbitrary<string> | null {
  const key = `/${regex.source}/${regex.flags}`;
  let matching = matchers.get(key);
  if (matching === undefined) {
    try {
      matching = fc.stringMatching(regex);
    } catch {
      matching = null;
    }
    matchers.set(key, matching);
  }
  return matching;
}

/**
 * Strings: by the regular expression of a format of the document's own (narrower than the
 * pattern beside it), or by pattern (every pattern of an allOf held, the lengths, and the format
 * by `inFormat`), by format, or any, within the lengths.
 */
function stringOf(s: Schema, inFormat: (value: string) => boolean, formatRegex?: RegExp): fc.Arbitrary<string> {
  const patterns = [...((s.patterns as string[] | undefined) ?? []), ...(s.pattern ? [s.pattern as string] : [])];
  const minLength = (s.minLength as number | undefined) ?? 0;
  const maxLength = Math.min((s.maxLength as number | undefined) ?? 60, 60);
  const all = patterns.map((q) => new RegExp(q, "u"));
  for (const regex of [...(formatRegex ? [formatRegex] : []), ...all]) {
    const matching = matchingArbitrary(regex);
    if (!matching) continue; // A construct fast-check cannot generate from: the next pattern, or as below.
    const max = (s.maxLength as number | undefined) ?? Number.POSITIVE_INFINITY;
    return matching.filter(
      (v) => v.length >= minLength && v.length <= max && all.every((r) => r.test(v)) && inFormat(v),
    );
  }
  // No pattern to generate from: any string of the format, or any at all (the validator classifies it).
  if (s.format === "email") return fc.emailAddress();
  if (s.format === "date-time") return fc.date(ISO_RANGE).map((d) => d.toISOString());
  if (s.format === "uri") return fc.webUrl();
  return fc.oneof(fc.string({ minLength, maxLength }), fc.string({ unit: "binary", minLength, maxLength }));
}

/** Schema to arbitrary, resolving `#/...` references in `doc`. */
export class SchemaArbitraries {
  /**
   * `compile` makes the check of a schema (a validator's, as the values are classified by one):
   * what a schema states in `not` is filtered out with it. `formats`: the regular expressions of
   * the document's own formats, which its values are generated from.
   */
  constructor(
    private readonly doc: Obj,
    private readonly compile: (schema: Schema) => (value: unknown) => boolean,
    private readonly formats: Record<string, { regex: RegExp }> = {},
  ) {}

  private readonly formatChecks = new Map<string, (value: unknown) => boolean>();

  /** The check of a format, compiled once. */
  private format(name: string): (value: unknown) => boolean {
    const check = this.formatChecks.get(name) ?? this.compile({ type: "string", format: name });
    this.formatChecks.set(name, check);
    return check;
  }

  /** Follows a local $ref to what it names. */
  resolve(schema: unknown): Schema {
    let s = (schema ?? {}) as Schema;
    while (typeof s.$ref === "string") {
      s = (s.$ref as string)
        .slice(2)
        .split("/")
        .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"))
        .reduce<unknown>((at, part) => (at as Obj)[part], this.doc) as Schema;
    }
    return s;
  }

  /** Values the schema admits (give or take a pattern fast-check cannot generate from), its examples among them. */
  of(schema: unknown, depth = 0): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    const examples = [...(Array.isArray(s.examples) ? s.examples : []), ...("example" in s ? [s.example] : [])];
    const generated = this.generated(s, depth);
    return examples.length ? fc.oneof(fc.constantFrom(...examples), generated) : generated;
  }

  private generated(s: Schema, depth: number): fc.Arbitrary<unknown> {
    const { allOf, anyOf, oneOf, ...rest } = s;
    if (Array.isArray(allOf)) return this.of(merge(rest, ...allOf.map((b) => this.resolve(b))), depth);
    const branches = (oneOf ?? anyOf) as unknown[] | undefined;
    if (Array.isArray(branches)) {
      return fc.oneof(...branches.map((b) => this.of(merge(rest, this.resolve(b)), depth)));
    }
    const values = this.positive(s, depth);
    if (!s.not) return values;
    const excluded = this.compile(s.not as Schema);
    return values.filter((v) => !excluded(v));
  }

  /** Values of a schema without its combinators, and without its `not`. */
  private positive(s: Schema, depth: number): fc.Arbitrary<unknown> {
    if (s.const !== undefined) return fc.constant(s.const);
    if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum);
    const types = Array.isArray(s.type) ? (s.type as string[]) : s.type ? [s.type as string] : [this.guessType(s)];
    return fc.oneof(...types.map((t) => this.ofType(t, s, depth)));
  }

  private guessType(s: Schema): string {
    if (s.properties || s.required || s.additionalProperties !== undefined) return "object";
    if (s.items) return "array";
    if (s.pattern || s.patterns || s.minLength !== undefined || s.maxLength !== undefined || s.format) return "string";
    return "any";
  }

  private ofType(type: string, s: Schema, depth: number): fc.Arbitrary<unknown> {
    switch (type) {
      case "string":
        return s.format
          ? stringOf(s, this.format(s.format as string), this.formats[s.format as string]?.regex)
          : stringOf(s, () => true);
      case "integer":
        return fc.integer({
          min: (s.minimum as number | undefined) ?? -1_000_000,
          max: (s.maximum as number | undefined) ?? 1_000_000_000,
        });
      case "number":
        return fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e9, max: 1e9 });
      case "boolean":
        return fc.boolean();
      case "null":
        return fc.constant(null);
      case "array": {
        const minLength = (s.minItems as number | undefined) ?? 0;
        const maxLength = Math.min((s.maxItems as number | undefined) ?? 4, Math.max(minLength, depth > 2 ? 1 : 4));
        return fc.array(this.of(s.items, depth + 1), { minLength, maxLength });
      }
      case "object":
        return this.object(s, depth);
      default:
        return fc.jsonValue({ maxDepth: 2 });
    }
  }

  private object(s: Schema, depth: number): fc.Arbitrary<unknown> {
    const props = (s.properties as Obj | undefined) ?? {};
    const required = new Set((s.required as string[] | undefined) ?? []);
    const known = fc.record(
      Object.fromEntries(Object.entries(props).map(([name, p]) => [name, this.of(p, depth + 1)])),
      { requiredKeys: Object.keys(props).filter((n) => required.has(n)) },
    );
    const extra = s.additionalProperties;
    if (!extra || typeof extra !== "object") return known;
    const names = s.propertyNames ? (this.of(s.propertyNames, depth + 1) as fc.Arbitrary<string>) : fc.string();
    const maxKeys = Math.min((s.maxProperties as number | undefined) ?? 4, 4);
    return fc
      .tuple(known, fc.dictionary(names, this.of(extra, depth + 1), { maxKeys }))
      .map(([k, more]) => ({ ...more, ...(k as Obj) }));
  }
}

/** Values no schema field of the API takes as they are, or takes only within limits: wrong types, empties, the too long. */
const WRONG_VALUES: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, 0, -1, 1.5, 1e21, "", " ", "\r\n", [], {}, [null], { unknown: 1 }),
  fc.integer({ min: 300, max: 5_000 }).map((n) => "x".repeat(n)),
  fc.string({ unit: "binary", maxLength: 30 }),
);

const KINDS = ["replace", "remove", "add"] as const;

/** Where a mutation strikes: an index into the value's paths, and what it puts there (or removes, or adds). */
export interface Mutation {
  at: number;
  kind: (typeof KINDS)[number];
  value: unknown;
}

export const MUTATIONS: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom(...KINDS),
  value: WRONG_VALUES,
});

type Path = (string | number)[];

/** Every path into a JSON value (the value itself is the empty path). */
function pathsOf(value: unknown, at: Path = []): Path[] {
  const out = [at];
  if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...at, Array.isArray(value) ? Number(k) : k]));
  }
  return out;
}

/** The path a mutation's `at` picks: a depth first, then a path at that depth, so the top level is struck as often as the deepest. */
function pathAt(byDepth: Path[][], at: number): Path {
  const atDepth = byDepth[at % byDepth.length]!;
  return atDepth[Math.floor(at / byDepth.length) % atDepth.length]!;
}

/** A copy of `value` with `kind` made at `path`. */
function made(value: unknown, path: Path, kind: Mutation["kind"], wrong: unknown): unknown {
  const copy = structuredClone(value);
  if (path.length === 0)
    return kind === "add" && copy && typeof copy === "object" ? { ...copy, zzUnknown: wrong } : wrong;
  const parent = path.slice(0, -1).reduce<unknown>((o, k) => (o as Obj)[k as string], copy) as Obj | unknown[];
  const key = path.at(-1)!;
  if (kind === "remove") {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key as string];
  } else if (kind === "add" && !Array.isArray(parent)) parent[`${String(key)}Unknown`] = wrong;
  else (parent as Obj)[key as string] = wrong;
  return copy;
}

/**
 * A copy of `value` with the mutation made at one of its paths, broken by the schema whose check
 * is `admits`: a mutation the schema still admits (an optional field removed, a wrong value where
 * the schema takes any) gives way to the first from there on that it refuses, the other kinds at
 * its path, then the next paths; when none is refused, the value is as the mutation made it.
 */
export function mutate(value: unknown, m: Mutation, admits: (value: unknown) => boolean): unknown {
  const byDepth = [...Map.groupBy(pathsOf(value), (p) => p.length).values()];
  const first = made(value, pathAt(byDepth, m.at), m.kind, m.value);
  if (!admits(first)) return first;
  // Every path is picked once in as many steps as depths times the most paths at one depth.
  const steps = byDepth.length * Math.max(...byDepth.map((d) => d.length));
  for (let i = 0; i < steps; i++) {
    for (const kind of KINDS) {
      const broken = made(value, pathAt(byDepth, m.at + i), kind, m.value);
      if (!admits(broken)) return broken;
    }
  }
  return first;
}
