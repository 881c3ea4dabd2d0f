import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log/log";

// A full disk is an outage like any other: a write it refuses is refused or retried, counted and
// logged, and the process goes on; nothing it held is dropped for it.

/** The error codes of a write refused for want of space: the filesystem full, the user's quota spent, SQLite's "database or disk is full". */
const CODES = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

/** Whether err (or an error it was caused by) is a write refused for want of space. */
export function isDiskFull(err: unknown): boolean {
  let e = err;
  for (let depth = 0; e && depth < 5; depth++) {
    if (CODES.has(String((e as { code?: unknown }).code))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The code of a disk-full error, as its log line and a refusal say it ("ENOSPC"). */
export function diskFullCode(err: unknown): string {
  let e = err;
  for (let depth = 0; e && depth < 5; depth++) {
    const code = String((e as { code?: unknown }).code);
    if (CODES.has(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return "ENOSPC";
}

/**
 * Makes dir (with its parents); false when the disk has no room for it (noted on `disk` as
 * `file`), so that a process started on a full disk goes on and makes it at its first write.
 */
export function makeDir(dir: string, file: string, disk?: DiskSpace): boolean {
  try {
    mkdirSync(dir, { recursive: true });
    return true;
  } catch (err) {
    if (!isDiskFull(err)) throw err;
    disk?.noted(file, err);
    return false;
  }
}

/** Counts writes refused for want of space, by what could not be written. */
export interface DiskFullCounter {
  inc(labels: { file: string }): void;
}

const PROBE_BYTES = 16 * 1024;

/**
 * A process's watch on the filesystem it writes (its DATA_DIR). A write refused for want of
 * space is noted: counted (mailcore_disk_full_total, by file), and logged once when the
 * filesystem fills; from then on a small file is written and removed there each second, and
 * when one can be, a line says that space is back (after how long, how many refusals).
 */
export class DiskSpace {
  private fullSince: number | undefined;
  private refusals = 0;
  private probe: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
    private readonly counter?: DiskFullCounter,
    private readonly probeEveryMs = 1_000,
  ) {}

  /** Whether the last write noted was refused and no probe has written since. */
  get full(): boolean {
    return this.fullSince !== undefined;
  }

  /** A write of `file` (what it holds: "acks", "sink", "store") refused with err, a disk-full error. */
  noted(file: string, err: unknown): void {
    this.counter?.inc({ file });
    this.refusals++;
    if (this.fullSince !== undefined) return;
    this.fullSince = performance.now();
    this.log.warn("disk full: writes refused until there is space", {
      file,
      dir: this.dir,
      error: diskFullCode(err),
    });
    this.probe = setInterval(() => this.look(), this.probeEveryMs);
    this.probe.unref?.();
  }

  private look(): void {
    const file = join(this.dir, `.space-probe-${process.pid}`);
    try {
      writeFileSync(file, Buffer.alloc(PROBE_BYTES));
    } catch {
      return; // still full (or not writable at all: the next refusal says so)
    } finally {
      rmSync(file, { force: true });
    }
    this.log.info("disk space back", {
      dir: this.dir,
      downMs: Math.round(performance.now() - this.fullSince!),
      refusals: this.refusals,
    });
    this.stop();
  }

  /** Ends the watch's probe (at exit). */
  stop(): void {
    clearInterval(this.probe);
    this.probe = undefined;
    this.fullSince = undefined;
    this.refusals = 0;
  }
}
