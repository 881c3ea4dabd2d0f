// The two hot messages, AdmitBatchRequest and AdmitBatchResponse of
// proto/mailcore/limiter/v1/limiter.proto, encoded and decoded without protobuf-es's
// reflection: plain objects in, bytes out, and back. The proto file stays the contract:
// admit.test.ts checks every byte against the generated code, both ways.
import { type AdmitRequest, type AdmitResponse, LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";

/** The HTTP/2 path of LimiterService.AdmitBatch: the client calls it, the daemon serves it by hand. */
export const ADMIT_BATCH_PATH = `/${LimiterService.typeName}/${LimiterService.method.admitBatch.name}`;

/** The most admissions one AdmitBatch call may carry: fronts batch up to it, the daemon refuses more. */
export const MAX_ADMIT_BATCH = 1_000;

/** AdmitRequest, as a plain object. */
export type AdmitCall = Omit<AdmitRequest, "$typeName" | "$unknown">;

/** AdmitResponse, as a plain object. */
export type Admission = Omit<AdmitResponse, "$typeName" | "$unknown" | "tags"> & { tags: TagCount[] };

/** Tag, as a plain object: a tag and how many subscribers have it. */
export type TagCount = { name: string; subscribers: number };

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;
const key = (field: number, wireType: number) => (field << 3) | wireType;

export class WireError extends Error {}

/**
 * Buffer's own UTF-8 slice and write, which Node and Bun both have on every Buffer without
 * declaring them: 2 to 4 times faster than toString("utf8", ...) and write(...) (measured
 * on Bun 1.4.4), which add argument parsing around the very same calls.
 */
type Bytes = Buffer & {
  utf8Slice(start: number, end: number): string;
  utf8Write(s: string, offset: number, length: number): number;
};

// ---- encoding -------------------------------------------------------------------------
// Two passes: sizes first, then one buffer written front to back. Fields go out in field
// order and proto3 defaults (0, "", false) are left out, as protobuf-es writes them.

const varintSize = (v: number) => (v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5);
const strSize = (s: string) => (s.length === 0 ? 0 : Buffer.byteLength(s, "utf8"));

// Every key of these messages is one byte (field numbers below 16).
class Writer {
  pos = 0;
  constructor(readonly buf: Bytes) {}
  varint(v: number): void {
    while (v > 0x7f) {
      this.buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.pos++] = v;
  }
  /** A uint32 field, or an enum field (never negative here), left out when 0. */
  uint(k: number, v: number): void {
    if (v === 0) return;
    this.buf[this.pos++] = k;
    this.varint(v >>> 0);
  }
  str(k: number, s: string, bytes: number): void {
    if (bytes === 0) return;
    this.buf[this.pos++] = k;
    this.varint(bytes);
    this.pos += this.buf.utf8Write(s, this.pos, bytes);
  }
  /** A length-delimited field header (a submessage follows). */
  head(k: number, bytes: number): void {
    this.buf[this.pos++] = k;
    this.varint(bytes);
  }
}

const uintSize = (v: number) => (v === 0 ? 0 : 1 + varintSize(v >>> 0));
const lenSize = (bytes: number) => (bytes === 0 ? 0 : 1 + varintSize(bytes) + bytes);
const fieldOf = (bytes: number) => 1 + varintSize(bytes) + bytes;

/** AdmitBatchRequest, as bytes. */
export function encodeAdmitBatchRequest(calls: readonly AdmitCall[]): Buffer {
  const n = calls.length;
  const tokenBytes = new Array<number>(n);
  const ipBytes = new Array<number>(n);
  const sizes = new Array<number>(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const c = calls[i]!;
    tokenBytes[i] = strSize(c.token);
    ipBytes[i] = strSize(c.clientIp);
    sizes[i] = lenSize(tokenBytes[i]!) + lenSize(ipBytes[i]!) + (c.withTags ? 2 : 0);
    total += fieldOf(sizes[i]!);
  }
  const w = new Writer(Buffer.allocUnsafe(total) as Bytes);
  for (let i = 0; i < n; i++) {
    const c = calls[i]!;
    w.head(key(1, LEN), sizes[i]!);
    w.str(key(1, LEN), c.token, tokenBytes[i]!);
    w.str(key(2, LEN), c.clientIp, ipBytes[i]!);
    if (c.withTags) w.uint(key(3, VARINT), 1);
  }
  return w.buf;
}

/** AdmitBatchResponse, as bytes. */
export function encodeAdmitBatchResponse(responses: readonly Admission[]): Buffer {
  const n = responses.length;
  // Per response: its size, then the byte length of orgId, orgSlug, ticket and each tag name.
  const lens: number[] = [];
  let total = 0;
  for (let i = 0; i < n; i++) {
    const r = responses[i]!;
    const at = lens.length;
    lens.push(0, strSize(r.orgId), strSize(r.orgSlug), strSize(r.ticket));
    let size =
      uintSize(r.verdict) +
      lenSize(lens[at + 1]!) +
      lenSize(lens[at + 2]!) +
      uintSize(r.plan) +
      uintSize(r.limit) +
      uintSize(r.remaining) +
      uintSize(r.resetSeconds) +
      uintSize(r.retryAfterSeconds) +
      lenSize(lens[at + 3]!);
    for (const t of r.tags) {
      const b = strSize(t.name);
      lens.push(b);
      size += fieldOf(lenSize(b) + uintSize(t.subscribers));
    }
    lens[at] = size;
    total += fieldOf(size);
  }
  const w = new Writer(Buffer.allocUnsafe(total) as Bytes);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const r = responses[i]!;
    w.head(key(1, LEN), lens[at]!);
    w.uint(key(1, VARINT), r.verdict);
    w.str(key(2, LEN), r.orgId, lens[at + 1]!);
    w.str(key(3, LEN), r.orgSlug, lens[at + 2]!);
    w.uint(key(4, VARINT), r.plan);
    w.uint(key(5, VARINT), r.limit);
    w.uint(key(6, VARINT), r.remaining);
    w.uint(key(7, VARINT), r.resetSeconds);
    w.uint(key(8, VARINT), r.retryAfterSeconds);
    const ticketBytes = lens[at + 3]!;
    at += 4;
    for (const t of r.tags) {
      const b = lens[at++]!;
      w.head(key(9, LEN), lenSize(b) + uintSize(t.subscribers));
      w.str(key(1, LEN), t.name, b);
      w.uint(key(2, VARINT), t.subscribers);
    }
    w.str(key(10, LEN), r.ticket, ticketBytes);
  }
  return w.buf;
}

// ---- decoding -------------------------------------------------------------------------
// Unknown fields are skipped; a repeated scalar's last value wins; a truncated message or
// a known field of the wrong wire type is a WireError.

class Reader {
  pos: number;
  constructor(
    readonly buf: Bytes,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }
  /** The low 32 bits of a varint of up to 10 bytes. */
  varint(): number {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      if (this.pos >= this.end || shift > 63) throw new WireError("truncated or overlong varint");
      const b = this.buf[this.pos++]!;
      if (shift < 32) v |= (b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
  }
  /** The end of the length-delimited field that starts here. */
  len(): number {
    const n = this.varint() >>> 0;
    const end = this.pos + n;
    if (end > this.end) throw new WireError("truncated length-delimited field");
    return end;
  }
  str(): string {
    const end = this.len();
    const s = this.buf.utf8Slice(this.pos, end);
    this.pos = end;
    return s;
  }
  skip(wireType: number): void {
    if (wireType === VARINT) this.varint();
    else if (wireType === LEN) this.pos = this.len();
    else if (wireType === FIXED64) this.pos += 8;
    else if (wireType === FIXED32) this.pos += 4;
    else throw new WireError(`unsupported wire type ${wireType}`);
    if (this.pos > this.end) throw new WireError("truncated fixed-width field");
  }
  /** A field's number and wire type. */
  tag(): [field: number, wireType: number] {
    const k = this.varint() >>> 0;
    if (k >>> 3 === 0) throw new WireError("field number 0");
    return [k >>> 3, k & 7];
  }
}

function expectWire(field: number, got: number, want: number): void {
  if (got !== want) throw new WireError(`field ${field} has wire type ${got}, expected ${want}`);
}

const bytesOf = (b: Uint8Array) =>
  (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)) as Bytes;

/** The elements of field 1, a repeated message: what both batch messages hold. Other fields are skipped. */
function decodeField1<T>(bytes: Uint8Array, element: (m: Reader) => T): T[] {
  const r = new Reader(bytesOf(bytes), 0, bytes.byteLength);
  const out: T[] = [];
  while (r.pos < r.end) {
    const [field, wt] = r.tag();
    if (field !== 1) {
      r.skip(wt);
      continue;
    }
    expectWire(field, wt, LEN);
    const end = r.len();
    out.push(element(new Reader(r.buf, r.pos, end)));
    r.pos = end;
  }
  return out;
}

/** AdmitBatchRequest from bytes. */
export function decodeAdmitBatchRequest(bytes: Uint8Array): AdmitCall[] {
  return decodeField1(bytes, (m) => {
    const call: AdmitCall = { token: "", clientIp: "", withTags: false };
    while (m.pos < m.end) {
      const [f, t] = m.tag();
      if (f === 1) {
        expectWire(f, t, LEN);
        call.token = m.str();
      } else if (f === 2) {
        expectWire(f, t, LEN);
        call.clientIp = m.str();
      } else if (f === 3) {
        expectWire(f, t, VARINT);
        call.withTags = m.varint() !== 0;
      } else m.skip(t);
    }
    return call;
  });
}

function decodeTag(m: Reader): TagCount {
  const tag = { name: "", subscribers: 0 };
  while (m.pos < m.end) {
    const [f, t] = m.tag();
    if (f === 1) {
      expectWire(f, t, LEN);
      tag.name = m.str();
    } else if (f === 2) {
      expectWire(f, t, VARINT);
      tag.subscribers = m.varint() >>> 0;
    } else m.skip(t);
  }
  return tag;
}

/** AdmitBatchResponse from bytes. */
export function decodeAdmitBatchResponse(bytes: Uint8Array): Admission[] {
  return decodeField1(bytes, (m) => {
    const a: Admission = {
      verdict: 0,
      orgId: "",
      orgSlug: "",
      plan: 0,
      limit: 0,
      remaining: 0,
      resetSeconds: 0,
      retryAfterSeconds: 0,
      tags: [],
      ticket: "",
    };
    while (m.pos < m.end) {
      const [f, t] = m.tag();
      switch (f) {
        case 2:
          expectWire(f, t, LEN);
          a.orgId = m.str();
          break;
        case 3:
          expectWire(f, t, LEN);
          a.orgSlug = m.str();
          break;
        case 10:
          expectWire(f, t, LEN);
          a.ticket = m.str();
          break;
        case 9: {
          expectWire(f, t, LEN);
          const end = m.len();
          a.tags.push(decodeTag(new Reader(m.buf, m.pos, end)));
          m.pos = end;
          break;
        }
        case 1:
        case 4:
          // Enums are int32: a negative value is sign-extended on the wire.
          expectWire(f, t, VARINT);
          if (f === 1) a.verdict = m.varint() | 0;
          else a.plan = m.varint() | 0;
          break;
        case 5:
        case 6:
        case 7:
        case 8: {
          expectWire(f, t, VARINT);
          const v = m.varint() >>> 0;
          if (f === 5) a.limit = v;
          else if (f === 6) a.remaining = v;
          else if (f === 7) a.resetSeconds = v;
          else a.retryAfterSeconds = v;
          break;
        }
        default:
          m.skip(t);
      }
    }
    return a;
  });
}
