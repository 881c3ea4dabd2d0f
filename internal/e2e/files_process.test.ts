// What the processes leave under DATA_DIR is their user's alone: limiterd, a worker, an API and
// the SMTP front started on a data directory that does not exist yet, one message sent through
// to the file sink, then every file and folder under it looked at with stat.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { sendEmail, type SmtpProc, type Stack, startSmtp, startStack, tempDir, waitFor } from "../testkit/testkit";

/** Every path under dir (dir itself first), with its permission bits. */
function modesUnder(dir: string): Map<string, number> {
  const out = new Map<string, number>([[".", statSync(dir).mode & 0o777]]);
  for (const entry of readdirSync(dir, { recursive: true }) as string[]) {
    const path = join(dir, entry);
    out.set(relative(dir, path), statSync(path).mode & 0o777);
  }
  return out;
}

let stack: Stack;
let smtp: SmtpProc;
const dataDir = join(tempDir(), "data");
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DATA_DIR: dataDir } });
  smtp = await startSmtp(stack, { DATA_DIR: dataDir });
});
afterAll(async () => {
  await smtp?.proc.stop();
  await stack?.stop();
});

test("records, hot store, their WAL files, the sink, the ack journal, the SMTP certificate, the plane secret and the master key: files 0600, folders 0700", async () => {
  const token = await stack.org("files", "free");
  const sent = await sendEmail(stack.apiUrls[0]!, token, {
    from: "Files <no-reply@files.example>",
    to: "jane@example.org",
    subject: "Kept to ourselves",
    text: "Hello",
  });
  expect(sent.status).toBe(202);
  const eml = join(dataDir, "sink", `${sent.body.id}.eml`);
  await waitFor("the message in the sink", async () => statSync(eml, { throwIfNoEntry: false }) !== undefined);
  const modes = modesUnder(dataDir);
  for (const path of [
    ".",
    "records.db",
    "records.db-wal",
    "hot.db",
    "hot.db-wal",
    "sink",
    `sink/${sent.body.id}.eml`,
    "acks",
    "tls",
    "tls/cert.pem",
    "tls/key.pem",
    "plane.secret",
    "dkim-master.key",
  ])
    expect([path, modes.has(path)]).toEqual([path, true]);
  const open = [...modes].filter(([path, mode]) => {
    const isDir = statSync(join(dataDir, path)).isDirectory();
    return isDir ? mode !== 0o700 : mode !== 0o600;
  });
  expect(open.map(([path, mode]) => `${path} 0${mode.toString(8)}`)).toEqual([]);
});
