// What DKIM signing costs per message (npm run bench:dkim [--rounds 9]): signMessage with an
// RSA-2048 key, an Ed25519 key and both, on a typical message of about 2 KB (HTML and text) and
// one of about 100 KB, composed as the worker composes them (nodemailer, CRLF). Beside them,
// the ceiling measured in the same run: the bare private-key operation on a 32-byte hash and
// SHA-256 over the message, which no signer can go below; and composing the message, which
// the worker does for every delivery anyway. Each figure is the process's CPU time (user +
// system) per operation over a round, after a warm-up: the median of the rounds, and their
// least (the round the rest of a shared machine disturbed least); and the median wall time.
// Last, the worker's own step for the small message (internal/worker's composer: nodemailer,
// then the lease's keys, which a worker opens once and keeps), unsigned and signed.
import { create } from "@bufbuild/protobuf";
import { createHash, sign } from "node:crypto";
import { createTransport } from "nodemailer";
import { generateDkimKey } from "../internal/dkim/keys";
import { type DkimSigningKey, signMessage } from "../internal/dkim/sign";
import {
  EmailSchema,
  LeaseResponseSchema,
  type SigningKey,
  SigningKeySchema,
} from "../internal/gen/mailcore/limiter/v1/mail_pb";
import { composer as workerComposer } from "../internal/worker/transport";
import { table } from "./report";

const flags: Record<string, string> = Object.fromEntries(
  process.argv.slice(2).flatMap((a, i, all) => (a.startsWith("--") ? [[a.slice(2), all[i + 1] ?? ""]] : [])),
);
const ROUNDS = Number(flags.rounds || 9);
/** A round lasts about this long, so a preempted moment on a shared machine skews one round only. */
const ROUND_MS = 250;

const composer = createTransport({ streamTransport: true, buffer: true, newline: "windows" });
const paragraph =
  "Thanks for signing up. Here is what happens next: we set up your workspace, send you a short guide, and check in after a week to see how it went. ";
/** A message whose HTML part holds n paragraphs (and its text part the same words). */
const compose = async (n: number) =>
  (
    await composer.sendMail({
      from: "Acme <hello@example.com>",
      to: "jane.doe@example.org",
      replyTo: "support@example.com",
      subject: "Welcome to Acme, Jane",
      messageId: "<msg_5f1d2c3b4a5968778695a4b3@example.com>",
      headers: {
        "List-Unsubscribe": "<https://mail.example.com/u/tok_0123456789abcdef>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        "Feedback-ID": "cmp_1:org_1:mailcore",
      },
      text: paragraph.repeat(n),
      html: `<html><body>${`<p style="margin:0 0 12px">${paragraph}</p>\n`.repeat(n)}</body></html>`,
    })
  ).message as Buffer;

interface Measured {
  cpuUs: number;
  leastCpuUs: number;
  wallUs: number;
}

/** CPU and wall microseconds per call of fn, over ROUNDS rounds of about ROUND_MS each. */
async function measure(fn: () => unknown | Promise<unknown>): Promise<Measured> {
  const warm = performance.now();
  let calls = 0;
  while (performance.now() - warm < 200) {
    await fn();
    calls++;
  }
  const perRound = Math.max(5, Math.round((calls / 200) * ROUND_MS));
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = process.cpuUsage();
    const w0 = performance.now();
    for (let i = 0; i < perRound; i++) await fn();
    const c = process.cpuUsage(c0);
    wall.push(((performance.now() - w0) * 1000) / perRound);
    cpu.push((c.user + c.system) / perRound);
  }
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { cpuUs: median(cpu), leastCpuUs: Math.min(...cpu), wallUs: median(wall) };
}

const [rsa, ed] = await Promise.all([generateDkimKey("rsa-sha256"), generateDkimKey("ed25519-sha256")]);
const rsaKey: DkimSigningKey = {
  domain: "example.com",
  selector: "mc202611a",
  algorithm: "rsa-sha256",
  privateKey: rsa.privateKey,
};
const edKey: DkimSigningKey = {
  ...rsaKey,
  selector: "mc202611a-ed",
  algorithm: "ed25519-sha256",
  privateKey: ed.privateKey,
};
const sizes = { small: await compose(5), large: await compose(330) };
const hash32 = createHash("sha256").update("x").digest();

const rows: (string | number)[][] = [];
const row = async (what: string, fn: () => unknown) => {
  const m = await measure(fn);
  rows.push([what, m.cpuUs.toFixed(0), m.leastCpuUs.toFixed(0), m.wallUs.toFixed(0)]);
  console.error(`${what}: ${m.cpuUs.toFixed(0)} us CPU`);
};
for (const [name, message] of Object.entries(sizes)) {
  const kb = `${(message.length / 1024).toFixed(1)} KB`;
  await row(`sign, RSA-2048, ${kb}`, () => signMessage(message, [rsaKey]));
  await row(`sign, Ed25519, ${kb}`, () => signMessage(message, [edKey]));
  await row(`sign, RSA-2048 + Ed25519, ${kb}`, () => signMessage(message, [rsaKey, edKey]));
  await row(`ceiling: SHA-256 of the ${kb}`, () => createHash("sha256").update(message).digest());
  await row(`compose (nodemailer), ${kb} (${name})`, () => compose(name === "small" ? 5 : 330));
}
await row("ceiling: RSA-2048 signature of a 32-byte hash", () => sign("sha256", hash32, rsa.privateKey));
await row("ceiling: Ed25519 signature of a 32-byte hash", () => sign(null, hash32, ed.privateKey));

const prepare = workerComposer();
const leased = (keys: DkimSigningKey[]) =>
  create(LeaseResponseSchema, {
    messageId: "msg_5f1d2c3b4a5968778695a4b3",
    email: create(EmailSchema, {
      from: "Acme <hello@example.com>",
      fromAddress: "hello@example.com",
      to: "jane.doe@example.org",
      toAddress: "jane.doe@example.org",
      replyTo: "support@example.com",
      subject: "Welcome to Acme, Jane",
      text: paragraph.repeat(5),
      html: `<html><body>${`<p style="margin:0 0 12px">${paragraph}</p>\n`.repeat(5)}</body></html>`,
    }),
    signingKeys: keys.map(
      (k): SigningKey =>
        // As a lease carries them: PKCS#8 DER.
        create(SigningKeySchema, {
          domain: k.domain,
          selector: k.selector,
          algorithm: k.algorithm,
          privateKey: k.privateKey.export({ format: "der", type: "pkcs8" }),
        }),
    ),
  });
const workerKb = `${((await prepare(leased([]))).raw.length / 1024).toFixed(1)} KB`;
for (const [what, keys] of [
  ["unsigned", []],
  ["RSA-2048", [rsaKey]],
  ["Ed25519", [edKey]],
  ["RSA-2048 + Ed25519", [rsaKey, edKey]],
] as const) {
  const lease = leased([...keys]);
  await row(`worker: compose and sign, ${what}, ${workerKb}`, () => prepare(lease));
}

console.log(
  table(
    `DKIM signing per message: ${ROUNDS} rounds of ~${ROUND_MS} ms, Bun ${Bun.version}`,
    ["operation", "CPU us (median)", "CPU us (least)", "wall us (median)"],
    rows,
  ),
);
