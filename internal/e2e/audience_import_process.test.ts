// Importing a list: 100,000 subscribers in 100 batch requests of an enterprise organization,
// through limiterd and an API process on the embedded store; then the tag counts and a walk
// of one tag's subscribers agree with what was imported.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Stack, startStack } from "../testkit/testkit";

const BATCHES = 100;
const PER_BATCH = 1_000;
const VIP_EVERY = 100;

let stack: Stack;
let token: string;
beforeAll(async () => {
  stack = await startStack();
  token = await stack.org("importer", "enterprise");
}, 30_000);
afterAll(async () => {
  await stack?.stop();
});

const call = async (path: string, body?: unknown) => {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return {
    status: res.status,
    body: (await res.json()) as { data: Record<string, unknown>[]; nextCursor?: string | null },
  };
};

test("100,000 subscribers in 100 batch requests; the tag counts and a walk by tag match", async () => {
  const started = performance.now();
  for (let b = 0; b < BATCHES; b++) {
    const subscribers = Array.from({ length: PER_BATCH }, (_, i) => {
      const n = b * PER_BATCH + i;
      return {
        email: `person${n}@import.example`,
        name: `Person ${n}`,
        fields: { n, source: "crm" },
        tags: n % VIP_EVERY === 0 ? ["imported", "vip"] : ["imported"],
      };
    });
    const res = await call("/api/v1/subscribers/batch", { subscribers, triggerWorkflows: false });
    expect({ batch: b, status: res.status }).toEqual({ batch: b, status: 200 });
    expect(res.body.data.every((d) => d.result === "created")).toBe(true);
  }
  const seconds = (performance.now() - started) / 1_000;
  console.log(
    `imported ${BATCHES * PER_BATCH} subscribers in ${BATCHES} requests: ${seconds.toFixed(1)} s, ${Math.round((BATCHES * PER_BATCH) / seconds)} upserts/s`,
  );

  const tags = await call("/api/v1/tags");
  expect(tags.body.data).toEqual([
    { name: "imported", subscribers: BATCHES * PER_BATCH },
    { name: "vip", subscribers: (BATCHES * PER_BATCH) / VIP_EVERY },
  ]);
  const seen = new Set<string>();
  let cursor: string | null | undefined = "";
  while (cursor !== null && cursor !== undefined) {
    const page = await call(`/api/v1/subscribers?tag=vip&limit=100${cursor ? `&cursor=${cursor}` : ""}`);
    for (const s of page.body.data) seen.add(s.email as string);
    cursor = page.body.nextCursor;
  }
  expect(seen.size).toBe((BATCHES * PER_BATCH) / VIP_EVERY);
  expect(seen.has("person99900@import.example")).toBe(true);
}, 120_000);
