// The worker signs last, in the composing every transport shares: the file sink writes, and the
// relay sends, the signed bytes, from the lease's return path. The signatures are checked by
// verifiers nobody on the project wrote (dkimpy, Mail::DKIM) against the keys' records served
// by a DNS server of the test's own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { create } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { dkimRecordName, dkimRecordValue, generateDkimKey, splitTxtValue } from "../dkim/keys";
import { EmailSchema, type LeaseResponse, LeaseResponseSchema } from "../gen/mailcore/limiter/v1/mail_pb";
import { VERIFIERS } from "../testkit/dkimverifiers";
import { type DnsServer, startDnsServer } from "../testkit/dns";
import { type SmtpSink, startSmtpSink } from "../testkit/smtpsink";
import { tempDir } from "../testkit/testkit";
import { FileSink, SmtpRelay } from "./transport";

const RETURN_PATH = "msg_0a1b2c3d4e5f60718293a4b5-abcdefghijklmnop@bounces.example.com";
let dns: DnsServer;
let sink: SmtpSink;
let keys: LeaseResponse["signingKeys"];

beforeAll(async () => {
  dns = await startDnsServer();
  sink = await startSmtpSink({ host: "127.0.0.1" });
  const rsa = await generateDkimKey("rsa-sha256");
  const ed = await generateDkimKey("ed25519-sha256");
  keys = [
    { selector: "mc202611a", pair: rsa },
    { selector: "mc202611a-ed", pair: ed },
  ].map(({ selector, pair }) => {
    dns.setTxt(dkimRecordName(selector, "example.com"), [
      splitTxtValue(dkimRecordValue(pair.algorithm, pair.publicKey)),
    ]);
    return {
      $typeName: "mailcore.limiter.v1.SigningKey",
      domain: "example.com",
      selector,
      algorithm: pair.algorithm,
      privateKey: pair.privateKey.export({ format: "der", type: "pkcs8" }),
    };
  });
});
afterAll(async () => {
  await dns?.stop();
  await sink?.stop();
});

function lease(o: {
  signingKeys?: LeaseResponse["signingKeys"];
  returnPath?: string;
  headers?: Record<string, string>;
}) {
  return create(LeaseResponseSchema, {
    leaseId: "lease_1",
    messageId: "msg_0a1b2c3d4e5f60718293a4b5",
    orgId: "org_1",
    email: create(EmailSchema, {
      from: "Jane <jane@example.com>",
      fromAddress: "jane@example.com",
      to: "bob@example.org",
      toAddress: "bob@example.org",
      subject: "Your code",
      text: "Your code is 123456.\n",
      html: "<p>Your code is <b>123456</b>.</p>",
      headers: o.headers ?? {},
      tags: ["otp"],
    }),
    signingKeys: o.signingKeys ?? [],
    returnPath: o.returnPath ?? "",
  });
}

test("the file sink writes the signed bytes after a Return-Path of the lease's; both verifiers pass both signatures", async () => {
  const dir = tempDir();
  const fileSink = new FileSink(dir);
  const campaign = {
    "List-Unsubscribe": "<https://mail.example.com/u/tok_abc>",
    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    "Feedback-ID": "cmp_1:org_1:mailcore",
  };
  for (const m of [lease({ signingKeys: keys, returnPath: RETURN_PATH, headers: campaign })])
    await fileSink.send(await fileSink.prepare(m));
  const eml = readFileSync(join(dir, "msg_0a1b2c3d4e5f60718293a4b5.eml"));
  expect(eml.toString("latin1").split("\r\n")[0]).toBe(`Return-Path: <${RETURN_PATH}>`);
  for (const [name, verify] of Object.entries(VERIFIERS)) {
    const [signatures] = await verify([eml], dns.address);
    expect({ name, results: signatures!.map((s) => [s.selector, s.algorithm, s.result, s.detail]) }).toEqual({
      name,
      results: [
        ["mc202611a", "rsa-sha256", "pass", ""],
        // Debian 12's Mail::DKIM predates its Ed25519 support, and says so.
        name === "Mail::DKIM"
          ? ["mc202611a-ed", "ed25519-sha256", "invalid", "invalid (unsupported algorithm ed25519-sha256)"]
          : ["mc202611a-ed", "ed25519-sha256", "pass", ""],
      ],
    });
    expect(signatures![0]!.headers).toEqual(
      expect.arrayContaining(["list-unsubscribe", "list-unsubscribe-post", "feedback-id"]),
    );
  }
});

test("the relay is sent the signed bytes with the return path as MAIL FROM", async () => {
  const relay = new SmtpRelay(`smtp://${sink.host}:${sink.port}`);
  try {
    const result = await relay.send(await relay.prepare(lease({ signingKeys: keys, returnPath: RETURN_PATH })));
    expect(result.detail).toContain("250");
  } finally {
    relay.close();
  }
  const got = sink.received.at(-1)!;
  expect(got.mailFrom).toBe(RETURN_PATH);
  const [signatures] = await VERIFIERS["python3-dkim"]!([got.raw], dns.address);
  expect(signatures!.map((s) => s.result)).toEqual(["pass", "pass"]);
});

test("a lease without keys is composed unsigned; keys of another domain than From fail the composing, never send unsigned", async () => {
  const fileSink = new FileSink(tempDir());
  const plain = await fileSink.prepare(lease({}));
  expect(plain.raw.toString("latin1")).not.toContain("DKIM-Signature");
  const wrong = keys.map((k) => ({ ...k, domain: "other.example" }));
  await expect(fileSink.prepare(lease({ signingKeys: wrong }))).rejects.toThrow("d= must be the From domain");
});
