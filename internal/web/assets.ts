import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CONTENT_SECURITY_POLICY } from "./headers";

// The static files of the pages: one stylesheet and one script, read once at start.

export const ASSETS_PATH = "/assets/";

const FILES: Record<string, string> = {
  "site.css": "text/css; charset=utf-8",
  "console.js": "text/javascript; charset=utf-8",
  "favicon.svg": "image/svg+xml",
};

/** Serves /assets/<file>; undefined for any other path. */
export function assetHandler(): (path: string) => Response | undefined {
  const bodies = new Map(Object.keys(FILES).map((name) => [name, readFileSync(join(import.meta.dir, "assets", name))]));
  return (path) => {
    if (!path.startsWith(ASSETS_PATH)) return undefined;
    const name = path.slice(ASSETS_PATH.length);
    const body = bodies.get(name);
    if (!body)
      return new Response("Not found\n", {
        status: 404,
        headers: { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" },
      });
    return new Response(body, {
      headers: {
        "Content-Type": FILES[name]!,
        "Cache-Control": "public, max-age=300",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
      },
    });
  };
}
