// The shapes this document is built from: OpenAPI 3.1 objects, loosely typed (the linter in
// CI checks the document against the specification).

export type Schema = Record<string, unknown>;
export type Operation = Record<string, unknown>;
export type PathItem = Partial<Record<"get" | "post" | "put" | "patch" | "delete", Operation>> & {
  parameters?: unknown[];
};

/** One area of the API (one group of endpoints): a tag, its paths and the schemas only it uses. */
export interface ApiArea {
  tag: { name: string; description: string };
  paths: Record<string, PathItem>;
  schemas?: Record<string, Schema>;
}
