/** A route table: path patterns (their groups are the path's parameters) to what serves them. */
export type Routes<T> = readonly (readonly [RegExp, T])[];

/** The first route whose pattern matches the path, with the captured parameters. */
export function findRoute<T>(routes: Routes<T>, path: string): { route: T; params: string[] } | undefined {
  for (const [pattern, route] of routes) {
    const m = pattern.exec(path);
    if (m) return { route, params: m.slice(1) };
  }
  return undefined;
}

/** The pattern of a path template: each `{name}` is one path segment, captured. */
export function templatePattern(template: string): RegExp {
  return new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{\w+\}/g, "([^/]+)")}$`);
}

/** The Allow header of a path that serves `methods`: HEAD wherever GET is (RFC 9110). */
export function allowOf(methods: readonly string[]): string {
  return methods.flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m])).join(", ");
}
