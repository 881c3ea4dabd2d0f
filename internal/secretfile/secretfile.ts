// Secrets kept in files only the service's own user can read (mode 0600): made whole on the
// first start by whichever process comes first, read by the others. The file appears whole or
// not at all (written aside, then linked in place), so two processes starting together agree
// on one secret.
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname } from "node:path";

export class SecretFileError extends Error {}

/** The file's text; undefined when there is no file. Refuses a file that others than its owner may read. */
export function readSecretFile(path: string, what: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    throw new SecretFileError(`cannot read ${what} ${path}: ${code ?? (err as Error).message}`);
  }
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) !== 0)
    throw new SecretFileError(
      `${what} ${path} may be read by others than its owner (mode ${mode.toString(8).padStart(4, "0")}): chmod 600 it`,
    );
  return text;
}

/** The file's text, made with make() (mode 0600, its folder 0700 when made) when there is none. */
export function ensureSecretFile(path: string, what: string, make: () => string): { text: string; created: boolean } {
  const existing = readSecretFile(path, what);
  if (existing !== undefined) return { text: existing, created: false };
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const text = make();
  const aside = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    writeFileSync(aside, text, { mode: 0o600, flag: "wx" });
    // The mode given to open is masked by the umask; this one is not.
    chmodSync(aside, 0o600);
    linkSync(aside, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    return { text: readSecretFile(path, what)!, created: false };
  } finally {
    rmSync(aside, { force: true });
  }
  return { text, created: true };
}
