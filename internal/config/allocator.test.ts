import { expect, test } from "bun:test";
import { spawn } from "bun";
import { ALLOCATOR_ENV, withAllocatorEnv } from "./allocator";

test("withAllocatorEnv adds the allocator settings, and a value already set wins", () => {
  expect(withAllocatorEnv({ A: "1" })).toEqual({ A: "1", MIMALLOC_PURGE_HOLES: "0", MIMALLOC_PURGE_DELAY: "1000" });
  expect(withAllocatorEnv({ MIMALLOC_PURGE_DELAY: "250" }).MIMALLOC_PURGE_DELAY).toBe("250");
});

// The settings only matter if Bun's allocator reads them: a Bun whose allocator dropped or
// renamed an option would run with its defaults and nothing else would say so.
test("a Bun process started with them runs its allocator with them", async () => {
  const proc = spawn([process.execPath, "-e", "0"], {
    env: withAllocatorEnv({ ...process.env, MIMALLOC_VERBOSE: "1" }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  const options = Object.fromEntries(
    [...`${out}${err}`.matchAll(/option '(\w+)': (-?\d+)/g)].map((m) => [m[1]!, m[2]!]),
  );
  expect(options).toMatchObject({
    purge_holes: ALLOCATOR_ENV.MIMALLOC_PURGE_HOLES,
    purge_delay: ALLOCATOR_ENV.MIMALLOC_PURGE_DELAY,
  });
});
