import { afterAll, expect, test } from "bun:test";
import { chmodSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { captureLogger } from "../testkit/logcapture";
import { tempDir } from "../testkit/testkit";
import { privateDataDir } from "./datadir";

const before = process.umask();
afterAll(() => process.umask(before));
const modeOf = (path: string) => statSync(path).mode & 0o777;

test("a missing data directory is made 0700, and what is made after is the user's alone", () => {
  const dir = join(tempDir(), "data", "deeper");
  const logs = captureLogger();
  privateDataDir(dir, logs.log);
  expect(modeOf(dir)).toBe(0o700);
  writeFileSync(join(dir, "records.db"), "x", { mode: 0o644 });
  mkdirSync(join(dir, "sink"));
  expect([modeOf(join(dir, "records.db")), modeOf(join(dir, "sink"))]).toEqual([0o600, 0o700]);
  expect(logs.lines).toEqual([]);
});

test("a data directory made before and open to others is left as it is, with a warning that says how to close it", () => {
  const dir = join(tempDir(), "shared");
  mkdirSync(dir);
  chmodSync(dir, 0o755);
  const logs = captureLogger();
  privateDataDir(dir, logs.log);
  expect(modeOf(dir)).toBe(0o755);
  expect(logs.lines).toEqual([
    {
      level: "warn",
      msg: `DATA_DIR is open to other users of this host; close it with: chmod -R go= ${dir}`,
      fields: { dataDir: dir, mode: "0755" },
    },
  ]);
});
