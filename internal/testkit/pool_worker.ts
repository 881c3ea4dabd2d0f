// A worker for the worker pool's tests: spins for `spinMs`, throws when asked, echoes `value`.
import { serveJobs } from "../workerpool/pool";

serveJobs<{ spinMs?: number; fail?: string; value: string }, string>(({ spinMs = 0, fail, value }) => {
  const until = performance.now() + spinMs;
  while (performance.now() < until) {
    // busy, as a pathological render is
  }
  if (fail) throw new Error(fail);
  return value;
});
