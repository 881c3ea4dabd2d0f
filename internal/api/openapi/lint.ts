// Lints the OpenAPI document the API serves with Redocly CLI (its recommended-strict rules):
// `bun run internal/api/openapi/lint.ts`; exits with the linter's code.
import { spawnSync } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { openApiDocument } from "./document";

const dir = mkdtempSync(join(tmpdir(), "mailcore-openapi-"));
const file = join(dir, "openapi.json");
writeFileSync(file, JSON.stringify(openApiDocument(), null, 2));
const root = resolve(import.meta.dir, "../../..");
const run = spawnSync(
  [join(root, "node_modules/.bin/redocly"), "lint", "--config", join(import.meta.dir, "redocly.yaml"), file],
  {
    cwd: root,
    stdout: "inherit",
    stderr: "inherit",
    // Offline: no usage report, no update check.
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
  },
);
rmSync(dir, { recursive: true, force: true });
process.exit(run.exitCode ?? 1);
