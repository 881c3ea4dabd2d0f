// A worker's webhook slots are shared by organization first, over real processes (limiterd, an
// API, a worker with the default 64 slots) and a receiver this test starts: one organization's
// four endpoints never answer and have 80 deliveries due, more than every slot; another
// organization's delivery starts all the same, without waiting for any of those attempts to
// give up (15 s each).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Receiver, startReceiver } from "../testkit/receiver";
import { getJson, sendEmail, type Stack, startStack, waitFor } from "../testkit/testkit";

/** A worker's webhook slots (WEBHOOK_CONCURRENCY's default) and one organization's share of them. */
const SLOTS = 64;
const ORG_SHARE = SLOTS / 4;

let stack: Stack;
let receiver: Receiver;
beforeAll(async () => {
  receiver = startReceiver();
  stack = await startStack({ workers: 1, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "1" } });
});
afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
});

async function webhookTo(token: string, path: string): Promise<string> {
  const res = await fetch(`${stack.apiUrls[0]}/api/v1/webhooks`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ url: `${receiver.url}${path}`, events: ["email.queued"] }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

const queue = (token: string, slug: string, i: number) =>
  sendEmail(stack.apiUrls[0]!, token, {
    from: `Hooks <no-reply@${slug}.example>`,
    to: `delivered+${i}@fixtures.test`,
    subject: `Event ${i}`,
    text: "Hello",
  });

test("four endpoints of one organization that never answer hold its share of the slots; another organization's delivery starts at once", async () => {
  const hanging = ["/hang/0", "/hang/1", "/hang/2", "/hang/3"];
  for (const path of hanging) receiver.answer(path, () => new Promise<never>(() => {}));
  const slow = await stack.org("slow", "premium");
  const slowHooks = await Promise.all(hanging.map((path) => webhookTo(slow, path)));
  // 20 events to 4 endpoints: 80 deliveries due, more than the worker's 64 slots.
  for (let i = 0; i < 20; i++) expect((await queue(slow, "slow", i)).status).toBe(202);
  const held = () => hanging.reduce((n, path) => n + receiver.at(path).length, 0);
  await waitFor("the slow organization's share of the slots taken", async () => held() >= ORG_SHARE, 30_000);

  const other = await stack.org("other", "free");
  await webhookTo(other, "/other");
  const sent = performance.now();
  expect((await queue(other, "other", 0)).status).toBe(202);
  await waitFor("the other organization's delivery", async () => receiver.at("/other").length === 1, 30_000);
  const startedAfterMs = Math.round(performance.now() - sent);

  // It did not wait for a slot to come free: no attempt of the hanging endpoints has ended yet.
  for (const id of slowHooks) {
    const got = await getJson(`${stack.apiUrls[0]}/api/v1/webhooks/${id}/deliveries?limit=100`, slow);
    const attempts = (got.body.data as { attempts: unknown[] }[]).flatMap((d) => d.attempts);
    expect(attempts).toEqual([]);
  }
  // The slow organization holds its share and no more, however many of its deliveries are due.
  expect(held()).toBe(ORG_SHARE);
  console.log(`the other organization's delivery started ${startedAfterMs} ms after its send`);
});
