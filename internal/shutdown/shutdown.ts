import { endLogs, type Logger } from "../log/log";

/** Every process is gone this long after SIGTERM, whatever is still under way. */
export const SHUTDOWN_LIMIT_MS = 10_000;

/**
 * On SIGTERM or SIGINT: runs `stop` (stop accepting, finish or hand back the work under way),
 * then exits 0. If stopping takes longer than the limit the process exits 1 anyway, with a
 * line that says so; a second signal exits at once.
 */
export function exitGracefully(log: Logger, stop: () => Promise<void>, limitMs = SHUTDOWN_LIMIT_MS - 500): void {
  let stopping = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (stopping) process.exit(1);
      stopping = true;
      const started = performance.now();
      log.info("stopping", { signal });
      // Ref'd on purpose: once the servers close, nothing else may hold the event loop, and the
      // process must not end quietly before `stop` has finished and said so.
      setTimeout(() => {
        log.error("stopping took too long; exiting with work still under way", { limitMs });
        process.exit(1);
      }, limitMs);
      // Every line out before exiting (a write still under way at exit is lost); the limit above
      // still bounds a stderr that never drains.
      const exit = async (code: number) => {
        await endLogs();
        process.exit(code);
      };
      stop().then(
        () => {
          log.info("stopped", { ms: Math.round(performance.now() - started) });
          void exit(0);
        },
        (err: Error) => {
          log.error("stopping failed", { error: err.message });
          void exit(1);
        },
      );
    });
  }
}
