// Settings of Bun's native allocator (mimalloc) for the service's processes.
//
// mimalloc reads them from the environment once, when the process starts, before any of our
// code runs; so whatever starts a process has to set them: `npm start`, the tests and the
// benchmark do (withAllocatorEnv), and docs/operations.md ("Allocator") gives them for systemd,
// containers and other launchers.
//
// Why: by default mimalloc's scavenger thread hands freed gaps inside its pages back to the
// OS every 100 ms (madvise, and with it a TLB shootdown interrupting the other core), and
// the process takes page faults when it reuses them. limiterd and the API allocate and free
// a lot of native memory under load (responses, headers, buffers, Redis replies). Measured
// in alternated pairs after 40-45 s of load (docs/performance.md, "The allocator settings"):
// limiterd's CPU per admission 14% lower in the daemon run and 22-24% lower per request of the
// full path; more in a process's first seconds. Memory still goes back, a second after its last
// use.

/** The allocator settings: no purging of holes inside pages, and free pages returned after 1 s. */
export const ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  MIMALLOC_PURGE_HOLES: "0",
  MIMALLOC_PURGE_DELAY: "1000",
};

/** env with the allocator settings added; a setting env already has wins, so an operator can override it. */
export function withAllocatorEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  return { ...ALLOCATOR_ENV, ...env };
}
