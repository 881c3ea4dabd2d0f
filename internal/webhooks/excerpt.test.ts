import { describe, expect, test } from "bun:test";
import { EXCERPT_CHARS, EXCERPT_READ_BYTES, excerptOf, readExcerpt } from "./excerpt";

const enc = new TextEncoder();

/** A response whose body comes in the given chunks, counting the bytes the reader pulled. */
function streamed(chunks: Uint8Array[]): { res: Response; pulled: () => number } {
  let pulled = 0;
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      const chunk = chunks[i++];
      if (!chunk) return c.close();
      pulled += chunk.length;
      c.enqueue(chunk);
    },
  });
  return { res: new Response(body), pulled: () => pulled };
}

describe("excerptOf", () => {
  test("removes control characters but newline and tab", () => {
    expect(excerptOf("a\u0000b\u0007c\r\n\td\u001b[31m\u007f\u0085e")).toBe("abc\n\td[31me");
  });

  test("cuts at 256 code points, never inside a surrogate pair", () => {
    expect(excerptOf("x".repeat(300))).toBe("x".repeat(EXCERPT_CHARS));
    const mails = excerptOf("✉️📨".repeat(200));
    expect(Array.from(mails)).toHaveLength(EXCERPT_CHARS);
    expect(mails.endsWith("\uD83D")).toBe(false);
  });
});

describe("readExcerpt", () => {
  test("decodes UTF-8 with invalid bytes replaced, a character split between chunks whole", async () => {
    const mail = enc.encode("✉"); // 3 bytes
    const { res } = streamed([
      new Uint8Array([0x6f, 0x6b, 0xff, 0x20, mail[0]!]),
      new Uint8Array([mail[1]!, mail[2]!, 0x0a]),
    ]);
    expect(await readExcerpt(res)).toBe("ok\uFFFD ✉\n");
  });

  test("an empty body gives an empty excerpt", async () => {
    expect(await readExcerpt(new Response(null, { status: 503 }))).toBe("");
  });

  test("stops reading once the excerpt is full, and reads at most 4 KB of a body of control characters", async () => {
    const long = streamed(Array.from({ length: 100 }, () => enc.encode("y".repeat(1_000))));
    expect(await readExcerpt(long.res)).toBe("y".repeat(EXCERPT_CHARS));
    expect(long.pulled()).toBeLessThanOrEqual(2_000); // the first chunk, maybe one read ahead
    const noise = streamed(Array.from({ length: 100 }, () => new Uint8Array(1_000).fill(7)));
    expect(await readExcerpt(noise.res)).toBe("");
    expect(noise.pulled()).toBeLessThanOrEqual(EXCERPT_READ_BYTES + 2_000);
  });

  test("a body that breaks off keeps what came before", async () => {
    let sent = false;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent) return c.error(new Error("connection reset"));
        sent = true;
        c.enqueue(enc.encode("partial"));
      },
    });
    expect(await readExcerpt(new Response(body))).toBe("partial");
  });
});
