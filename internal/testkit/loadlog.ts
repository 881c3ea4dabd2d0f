// A preload (`bun run --preload internal/testkit/loadlog.ts ...`) that appends the path of each
// JavaScript or TypeScript module the process loads, one a line, to the file named by
// MODULE_LOG: what a process really loads at run time, dynamic imports and packages included.
import { appendFileSync, readFileSync } from "node:fs";

const log = process.env.MODULE_LOG;
if (!log) throw new Error("loadlog.ts needs MODULE_LOG, the file to write the modules' paths to");
Bun.plugin({
  name: "module log",
  setup(build) {
    build.onLoad({ filter: /\.(ts|js|mjs|cjs)$/ }, ({ path }) => {
      appendFileSync(log, `${path}\n`);
      return { contents: readFileSync(path, "utf8"), loader: path.endsWith(".ts") ? "ts" : "js" };
    });
  },
});
