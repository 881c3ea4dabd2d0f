// The hand codec against the generated one (protobuf-es), byte for byte both ways.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, test } from "bun:test";
import {
  AdmitBatchRequestSchema,
  AdmitBatchResponseSchema,
  Plan,
  Verdict,
} from "../gen/mailcore/limiter/v1/limiter_pb";
import {
  type Admission,
  type AdmitCall,
  decodeAdmitBatchRequest,
  decodeAdmitBatchResponse,
  encodeAdmitBatchRequest,
  encodeAdmitBatchResponse,
  WireError,
} from "./admit";

// A small seeded generator, so a failure can be replayed.
function rng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
}
const ALPHABET = ["a", "Z", "0", "-", "_", ".", ":", "é", "€", "𝄞", "\u0000"];
function gen(seed: number) {
  const r = rng(seed);
  const int = (n: number) => Math.floor(r() * n);
  const str = (max: number) => Array.from({ length: int(max) }, () => ALPHABET[int(ALPHABET.length)]).join("");
  const u32 = () => [0, 1, 127, 128, 16_383, 16_384, 2_000, 2 ** 31, 2 ** 32 - 1][int(9)]!;
  return {
    call: (): AdmitCall => ({ token: r() < 0.2 ? "" : str(200), clientIp: str(40), withTags: r() < 0.5 }),
    admission: (): Admission => ({
      verdict: int(5) as Verdict,
      orgId: str(30),
      orgSlug: str(150),
      plan: int(4) as Plan,
      limit: u32(),
      remaining: u32(),
      resetSeconds: u32(),
      retryAfterSeconds: u32(),
      tags: Array.from({ length: int(4) }, () => ({ name: str(20), subscribers: u32() })),
      ticket: r() < 0.3 ? "" : str(80),
    }),
    int,
  };
}

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const plain = <T extends object>(m: T) =>
  JSON.parse(JSON.stringify(m, (k, v) => (k === "$typeName" || k === "$unknown" ? undefined : v)));

describe("AdmitBatchRequest", () => {
  test("encodes byte for byte as protobuf-es, and decodes what protobuf-es encodes", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const g = gen(seed);
      const calls = Array.from({ length: g.int(seed === 1 ? 1 : 40) }, g.call);
      const reference = toBinary(AdmitBatchRequestSchema, create(AdmitBatchRequestSchema, { requests: calls }));
      expect(hex(encodeAdmitBatchRequest(calls))).toBe(hex(reference));
      expect(decodeAdmitBatchRequest(reference)).toEqual(calls);
    }
  });

  test("a full batch of real-looking calls", () => {
    const calls = Array.from({ length: 1000 }, (_, i) => ({
      token: `mc_${String(i).padStart(43, "x")}`,
      clientIp: `198.18.${i >> 8}.${i & 255}`,
      withTags: i % 3 === 0,
    }));
    const reference = toBinary(AdmitBatchRequestSchema, create(AdmitBatchRequestSchema, { requests: calls }));
    expect(hex(encodeAdmitBatchRequest(calls))).toBe(hex(reference));
    expect(decodeAdmitBatchRequest(reference)).toEqual(calls);
  });
});

describe("AdmitBatchResponse", () => {
  test("encodes byte for byte as protobuf-es, and decodes what protobuf-es encodes", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const g = gen(seed);
      const responses = Array.from({ length: g.int(40) }, g.admission);
      const reference = toBinary(AdmitBatchResponseSchema, create(AdmitBatchResponseSchema, { responses }));
      expect(hex(encodeAdmitBatchResponse(responses))).toBe(hex(reference));
      expect(decodeAdmitBatchResponse(reference)).toEqual(responses);
    }
  });

  test("a real-looking allowed admission with tags and its ticket", () => {
    const responses: Admission[] = [
      {
        verdict: Verdict.ALLOWED,
        orgId: "org_01HZX3",
        orgSlug: "acme",
        plan: Plan.ENTERPRISE,
        limit: 2000,
        remaining: 1999,
        resetSeconds: 1,
        retryAfterSeconds: 0,
        tags: [{ name: "newsletter", subscribers: 1250 }],
        ticket: "org_01HZX3.1700000120.q3Yh0l5y7Wn1bBq0sVnN8A",
      },
    ];
    const reference = toBinary(AdmitBatchResponseSchema, create(AdmitBatchResponseSchema, { responses }));
    expect(hex(encodeAdmitBatchResponse(responses))).toBe(hex(reference));
    expect(decodeAdmitBatchResponse(reference)).toEqual(responses);
  });

  test("a negative enum (sign-extended to 10 bytes by other encoders) decodes as protobuf-es decodes it", () => {
    const reference = toBinary(
      AdmitBatchResponseSchema,
      create(AdmitBatchResponseSchema, { responses: [{ verdict: -1 as Verdict, plan: Plan.PREMIUM }] }),
    );
    expect(decodeAdmitBatchResponse(reference)).toMatchObject([{ verdict: -1, plan: Plan.PREMIUM }]);
  });
});

describe("decoding", () => {
  // Unknown fields of every wire type, at the top level and inside each element.
  const unknown = Buffer.from([
    0x78,
    0x96,
    0x01, // field 15, varint 150
    0x7a,
    0x02,
    0x68,
    0x69, // field 15, "hi"
    0x7d,
    1,
    2,
    3,
    4, // field 15, fixed32
    0x79,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8, // field 15, fixed64
  ]);
  const element = (inner: Uint8Array) =>
    Buffer.concat([Buffer.from([0x0a, inner.length + unknown.length]), unknown, inner]);

  test("skips unknown fields, as protobuf-es does", () => {
    const call = toBinary(
      AdmitBatchRequestSchema.fields[0]!.message!,
      create(AdmitBatchRequestSchema.fields[0]!.message!, { token: "t", clientIp: "192.0.2.1", withTags: true }),
    );
    const req = Buffer.concat([unknown, element(call), unknown]);
    expect(decodeAdmitBatchRequest(req)).toEqual(plain(fromBinary(AdmitBatchRequestSchema, req)).requests);
    expect(decodeAdmitBatchRequest(req)).toEqual([{ token: "t", clientIp: "192.0.2.1", withTags: true }]);

    const admission = {
      verdict: Verdict.ALLOWED,
      orgId: "org_1",
      orgSlug: "acme",
      plan: Plan.PREMIUM,
      limit: 700,
      remaining: 699,
      resetSeconds: 1,
      retryAfterSeconds: 0,
      tags: [{ name: "vip", subscribers: 3 }],
      ticket: "org_1.1700000000.AAAAAAAAAAAAAAAAAAAAAA",
    };
    const res = Buffer.concat([
      unknown,
      element(
        toBinary(AdmitBatchResponseSchema, create(AdmitBatchResponseSchema, { responses: [admission] })).subarray(2),
      ),
      unknown,
    ]);
    expect(decodeAdmitBatchResponse(res)).toEqual([admission]);
    expect(decodeAdmitBatchResponse(res)).toEqual(plain(fromBinary(AdmitBatchResponseSchema, res)).responses);
  });

  test("a truncated message or a field of the wrong wire type is an error", () => {
    const full = encodeAdmitBatchRequest([{ token: "mc_token", clientIp: "192.0.2.1", withTags: true }]);
    for (let cut = 1; cut < full.length; cut++)
      expect(() => decodeAdmitBatchRequest(full.subarray(0, cut))).toThrow(WireError);
    expect(() => decodeAdmitBatchRequest(Buffer.from([0x0a, 0x02, 0x08, 0x01]))).toThrow(WireError); // token as a varint
    expect(() => decodeAdmitBatchResponse(Buffer.from([0x0a, 0x02, 0x0a, 0x00]))).toThrow(WireError); // verdict as bytes
    expect(() => decodeAdmitBatchRequest(Buffer.from([0x0b]))).toThrow(WireError); // a group
  });

  test("reads from any Uint8Array view, not only a Buffer at offset 0", () => {
    const bytes = encodeAdmitBatchRequest([{ token: "x", clientIp: "::1", withTags: false }]);
    const padded = new Uint8Array(bytes.length + 3);
    padded.set(bytes, 3);
    expect(decodeAdmitBatchRequest(padded.subarray(3))).toEqual([{ token: "x", clientIp: "::1", withTags: false }]);
  });
});
