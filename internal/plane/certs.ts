// Certificates for the internal plane without a PKI team: a CA of the deployment's own, the
// daemon's server certificate, and one client certificate per role. selfsigned (already used
// for the development SMTP certificate) issues them: it signs with a given CA and writes URI
// SANs, on @peculiar/x509 and WebCrypto, so no openssl command is needed.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { generate, type SubjectAltNameEntry } from "selfsigned";
import { diskFullCode, isDiskFull } from "../diskspace/diskspace";
import { ROLES, type Role, roleUri } from "./tls";

export interface CertPem {
  cert: string;
  key: string;
}

const CA_VALIDITY_DAYS = 3_650;
const LEAF_VALIDITY_DAYS = 825;
const DAY_MS = 86_400_000;

/** EC P-256: small certificates and the cheapest handshakes. */
const KEY = { keyType: "ec", curve: "P-256", algorithm: "sha256" } as const;

/** A new CA that signs the plane's certificates. */
export async function newCa(name: string, now = new Date()): Promise<CertPem> {
  const pems = await generate([{ name: "commonName", value: name }], {
    ...KEY,
    notBeforeDate: new Date(now.getTime() - 60_000),
    notAfterDate: new Date(now.getTime() + CA_VALIDITY_DAYS * DAY_MS),
    extensions: [
      { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

export interface CertRequest {
  /** The subject's common name. */
  name: string;
  /** A server certificate for these host names and IP addresses. */
  hosts?: string[];
  /** A client certificate naming these roles. */
  roles?: Role[];
  notBefore?: Date;
  notAfter?: Date;
}

/** A certificate signed by ca: a server's (with hosts) or a client's (with roles). */
export async function issueCert(ca: CertPem, r: CertRequest): Promise<CertPem> {
  const now = Date.now();
  const server = r.hosts !== undefined;
  const altNames: SubjectAltNameEntry[] = server
    ? r.hosts!.map((h) => (isIP(h) ? { type: 7, ip: h } : { type: 2, value: h }))
    : (r.roles ?? []).map((role) => ({ type: 6, value: roleUri(role) }));
  const pems = await generate([{ name: "commonName", value: r.name }], {
    ...KEY,
    ca: { cert: ca.cert, key: ca.key },
    notBeforeDate: r.notBefore ?? new Date(now - 60_000),
    notAfterDate: r.notAfter ?? new Date(now + LEAF_VALIDITY_DAYS * DAY_MS),
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: server, clientAuth: !server },
      { name: "subjectAltName", altNames },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** The files certs init writes: the CA, the daemon's, and one pair per role. */
export const CERT_FILES = ["ca", "daemon", ...ROLES].flatMap((n) => [`${n}.pem`, `${n}.key`]);

/**
 * Writes a new CA, the daemon's certificate (for localhost, 127.0.0.1 and hosts) and the
 * front, worker and admin client certificates into dir, keys mode 0600. Refuses a directory
 * that already holds one of the files: a CA overwritten would lock out every process.
 */
export async function initCerts(dir: string, hosts: string[]): Promise<string[]> {
  const taken = CERT_FILES.filter((f) => existsSync(join(dir, f)));
  if (taken.length > 0) throw new Error(`${dir} already holds ${taken.join(", ")}: give a new directory`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // A name of its own for each CA: while two CAs are trusted together (rotation), TLS picks the
  // issuer of a certificate by name, and two CAs of one name fail the other's signatures.
  const ca = await newCa(
    `mailcore internal CA ${new Date().toISOString().slice(0, 10)} ${randomBytes(4).toString("hex")}`,
  );
  const pairs: [string, CertPem][] = [
    ["ca", ca],
    ["daemon", await issueCert(ca, { name: "limiterd", hosts: ["localhost", "127.0.0.1", ...hosts] })],
  ];
  for (const role of ROLES) pairs.push([role, await issueCert(ca, { name: `mailcore ${role}`, roles: [role] })]);
  // Each file ends with a line end, so that `cat old/ca.pem new/ca.pem` is a valid bundle (rotation).
  const line = (pem: string) => (pem.endsWith("\n") ? pem : `${pem}\n`);
  try {
    for (const [name, pem] of pairs) {
      writeFileSync(join(dir, `${name}.key`), line(pem.key), { mode: 0o600 });
      writeFileSync(join(dir, `${name}.pem`), line(pem.cert), { mode: 0o644 });
    }
  } catch (err) {
    // Half a set would make the next run refuse the directory: none is kept.
    for (const f of CERT_FILES) rmSync(join(dir, f), { force: true });
    if (!isDiskFull(err)) throw err;
    throw new Error(
      `${dir}: no room on the disk (${diskFullCode(err)}); nothing was kept: free space and run it again`,
    );
  }
  return CERT_FILES.map((f) => join(dir, f));
}
