import { mkdirSync, statSync } from "node:fs";
import type { Logger } from "../log/log";

// DATA_DIR holds the records (password hashes, webhook signing secrets, message bodies), the hot
// store, the file sink, the ack journal, certificates and keys: nothing in it is for other users
// of the host. Each process sets its umask at start, so that every file it makes, SQLite's WAL
// and shared-memory files included, is its user's alone, rather than giving each file a mode
// where it is made (and missing the ones a library makes).

/** Every file this process makes from now on is its user's alone: files 0600, folders 0700 (umask 077). */
export function ownerOnlyFiles(): void {
  process.umask(0o077);
}

/**
 * ownerOnlyFiles, and the data directory made 0700 when it is missing. One made before and open
 * to other users is left as it is (it may be shared on purpose; files made there by an earlier
 * version keep their modes): the process warns, with the command that closes it.
 */
export function privateDataDir(dir: string, log: Logger): void {
  ownerOnlyFiles();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const mode = statSync(dir).mode & 0o777;
  if ((mode & 0o077) !== 0)
    log.warn(`DATA_DIR is open to other users of this host; close it with: chmod -R go= ${dir}`, {
      dataDir: dir,
      mode: `0${mode.toString(8)}`,
    });
}
