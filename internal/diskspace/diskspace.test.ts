import { expect, test } from "bun:test";
import { ConnectError, Code } from "@connectrpc/connect";
import { rmSync, writeFileSync } from "node:fs";
import { captureLogger } from "../testkit/logcapture";
import { tempDir, waitFor } from "../testkit/testkit";
import { DiskSpace, diskFullCode, isDiskFull } from "./diskspace";

/** What writing to /dev/full throws: the kernel's own ENOSPC, as a full filesystem gives it. */
function enospc(): unknown {
  try {
    writeFileSync("/dev/full", "x");
  } catch (err) {
    return err;
  }
  throw new Error("/dev/full took a write");
}

test("a write refused for want of space is known as such, through the errors it caused", () => {
  const err = enospc();
  expect(isDiskFull(err)).toBe(true);
  expect(diskFullCode(err)).toBe("ENOSPC");
  const rpc = new ConnectError("store unavailable", Code.Unavailable, undefined, undefined, err);
  expect(isDiskFull(rpc)).toBe(true);
  expect(isDiskFull(Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" }))).toBe(true);
  expect(diskFullCode(Object.assign(new Error("quota"), { code: "EDQUOT" }))).toBe("EDQUOT");
  let enoent: unknown;
  try {
    writeFileSync("/nonexistent/x", "x");
  } catch (e) {
    enoent = e;
  }
  expect(isDiskFull(enoent)).toBe(false);
  expect(isDiskFull(new ConnectError("store unavailable", Code.Unavailable))).toBe(false);
});

test("a full disk is counted at every refusal, logged once, and said to be back when a probe can write", async () => {
  const dir = tempDir();
  const { log, lines } = captureLogger();
  const counted: string[] = [];
  const disk = new DiskSpace(dir, log, { inc: ({ file }) => void counted.push(file) }, 20);
  try {
    disk.noted("acks", enospc());
    disk.noted("sink", enospc());
    disk.noted("acks", enospc());
    expect(counted).toEqual(["acks", "sink", "acks"]);
    expect(disk.full).toBe(true);
    expect(lines).toEqual([
      {
        level: "warn",
        msg: "disk full: writes refused until there is space",
        fields: { file: "acks", dir, error: "ENOSPC" },
      },
    ]);
    // The directory has room: the first probe finds it (a probe on a full filesystem: the
    // process test of a full disk).
    await waitFor("space back", async () => !disk.full);
    expect(lines[1]).toMatchObject({ level: "info", msg: "disk space back", fields: { dir, refusals: 3 } });
    expect(lines).toHaveLength(2);
    // The next refusal starts a new episode.
    disk.noted("store", enospc());
    expect(lines[2]).toMatchObject({ level: "warn", fields: { file: "store" } });
  } finally {
    disk.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
