// The certificate of STARTTLS: the configured PEM files (SMTP_TLS_CERT, SMTP_TLS_KEY), or in
// development a self-signed one made on the first start under DATA_DIR/tls/ and reused after.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import { generate } from "selfsigned";
import { ConfigError, loadOrExit } from "../config/config";
import { type DiskSpace, isDiskFull } from "../diskspace/diskspace";

export interface TlsFiles {
  cert: string;
  key: string;
  /** "configured", or "self-signed" for the development certificate. */
  source: "configured" | "self-signed";
  /** A development certificate the disk had no room for: the pair, held in memory until the next start. */
  unkept?: TlsMaterial;
}

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
}

const DEV_VALIDITY_DAYS = 825;

/**
 * The development certificate `dir`/cert.pem with `dir`/key.pem, made when missing: EC P-256,
 * for localhost, 127.0.0.1, ::1 and this host's name. The pair is written into a directory
 * of its own that is then renamed to `dir` in one step, so a crash never leaves half a
 * pair and fronts starting together on one data directory end up with one pair. A disk with
 * no room for it (noted on `disk`) leaves nothing behind: the pair is served from memory
 * (`unkept`), and the next start writes it.
 */
export async function devCertificate(dir: string, disk?: DiskSpace): Promise<TlsFiles> {
  const files: TlsFiles = { cert: join(dir, "cert.pem"), key: join(dir, "key.pem"), source: "self-signed" };
  const complete = () => existsSync(files.cert) && existsSync(files.key);
  if (complete()) return files;
  const name = hostname() || "localhost";
  const now = new Date();
  const pems = await generate([{ name: "commonName", value: "mailcore development SMTP" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notBeforeDate: new Date(now.getTime() - 60_000),
    notAfterDate: new Date(now.getTime() + DEV_VALIDITY_DAYS * 86_400_000),
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          ...(name !== "localhost" ? [{ type: 2 as const, value: name }] : []),
          { type: 7, ip: "127.0.0.1" },
          { type: 7, ip: "::1" },
        ],
      },
    ],
  });
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    mkdirSync(tmp, { recursive: true, mode: 0o700 });
    writeFileSync(join(tmp, "key.pem"), pems.private, { mode: 0o600 });
    writeFileSync(join(tmp, "cert.pem"), pems.cert);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    if (!isDiskFull(err)) throw err;
    disk?.noted("certificate", err);
    return { ...files, unkept: { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private) } };
  }
  try {
    renameSync(tmp, dir); // replaces `dir` only when it is missing or empty
  } catch {
    rmSync(tmp, { recursive: true, force: true });
    if (!complete()) {
      throw new ConfigError(
        `${dir} exists without both cert.pem and key.pem; remove it to have a new self-signed certificate made, or set SMTP_TLS_CERT and SMTP_TLS_KEY`,
      );
    }
  }
  return files;
}

/**
 * What a front serves STARTTLS with (the submission front, the inbound MX): the configured pair,
 * else the development certificate under dataDir/tls. A pair that cannot be used, or made, stops
 * the process with the reason (exit 2), as a configuration error does.
 */
export async function frontTls(
  process_: string,
  o: { dataDir: string; cert: string | undefined; key: string | undefined },
  disk: DiskSpace,
): Promise<{ files: TlsFiles; tls: TlsMaterial }> {
  const files: TlsFiles =
    o.cert && o.key
      ? { cert: o.cert, key: o.key, source: "configured" }
      : await devCertificate(join(o.dataDir, "tls"), disk).catch((err: unknown) =>
          loadOrExit(process_, () => {
            throw err;
          }),
        );
  return { files, tls: files.unkept ?? loadOrExit(process_, () => readTls(files)) };
}

/** Reads a certificate and key; a pair that TLS cannot use is a ConfigError naming the files. */
export function readTls(files: Pick<TlsFiles, "cert" | "key">): TlsMaterial {
  const cert = readFileSync(files.cert);
  const key = readFileSync(files.key);
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new ConfigError(
      `the TLS certificate ${files.cert} and key ${files.key} cannot be used: ${(err as Error).message}`,
    );
  }
  return { cert, key };
}
