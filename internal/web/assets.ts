import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CONTENT_SECURITY_POLICY } from "./headers";

// The static files of the pages: one stylesheet and one script, read once at start.

export const ASSETS_PATH = "/assets/";

/** A file served as it is on disk: where it is and its Content-Type. */
export interface StaticFile {
  path: string;
  type: string;
}

/**
 * Files read once at start, each answered by its name with its type, cached for five minutes,
 * under `policy`; undefined for a name that is none of them.
 */
export function staticFiles(
  files: Record<string, StaticFile>,
  policy = CONTENT_SECURITY_POLICY,
): (name: string) => Response | undefined {
  const bodies = new Map(
    Object.entries(files).map(([name, f]) => [name, { body: readFileSync(f.path), type: f.type }]),
  );
  return (name) => {
    const file = bodies.get(name);
    if (!file) return undefined;
    return new Response(file.body, {
      headers: {
        "Content-Type": file.type,
        "Cache-Control": "public, max-age=300",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": policy,
      },
    });
  };
}

const own = (name: string, type: string): StaticFile => ({ path: join(import.meta.dir, "assets", name), type });

const FILES: Record<string, StaticFile> = {
  "site.css": own("site.css", "text/css; charset=utf-8"),
  "console.js": own("console.js", "text/javascript; charset=utf-8"),
  "favicon.svg": own("favicon.svg", "image/svg+xml"),
};

/** Serves /assets/<file>; undefined for any other path. */
export function assetHandler(): (path: string) => Response | undefined {
  const file = staticFiles(FILES);
  return (path) => {
    if (!path.startsWith(ASSETS_PATH)) return undefined;
    return (
      file(path.slice(ASSETS_PATH.length)) ??
      new Response("Not found\n", {
        status: 404,
        headers: { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" },
      })
    );
  };
}
