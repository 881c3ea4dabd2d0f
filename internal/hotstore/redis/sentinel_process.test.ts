// REDIS_URL=redis+sentinel://: limiterd, the API and a worker as processes find the primary through
// a sentinel of the test's own, wait for its replica, and follow a failover the sentinel makes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  getJson,
  type RedisSentinelServer,
  sendEmail,
  type Stack,
  startRedisWithReplica,
  startSentinel,
  startStack,
  waitFor,
} from "../../testkit/testkit";

let pair: Awaited<ReturnType<typeof startRedisWithReplica>>;
let sentinel: RedisSentinelServer;
let stack: Stack;
let token: string;

beforeAll(async () => {
  pair = await startRedisWithReplica();
  sentinel = await startSentinel(pair.primary, "mailcore");
  stack = await startStack({
    redisUrl: `redis+sentinel://127.0.0.1:${sentinel.port}/mailcore`,
    workers: 1,
    // The wait's timeout as in replicas_process.test.ts: a loaded machine can hold the replica's
    // acknowledgement past the 250 ms default, and the first send must be confirmed.
    env: { REDIS_WAIT_TIMEOUT_MS: "1500" },
  });
  token = await stack.org("sentinel", "enterprise");
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await Promise.all([sentinel?.stop(), pair?.stop()]);
});

const mail = (to: string) => ({ from: "Acme <no-reply@sentinel.example>", to, subject: to, text: "hello" });
const sunk = (id: string) => existsSync(join(stack.dataDir, "sink", `${id}.eml`));

test("the primary the sentinel names, its replica waited for, and a failover followed", async () => {
  // The start line, or the line of a later look if the first did not answer.
  await waitFor("the daemon to find the replica", async () => stack.limiterd.stderr().includes('"replicas":1'));
  const before = await sendEmail(stack.apiUrls[0]!, token, mail("before@dest.example"));
  expect(before.status).toBe(202);
  await waitFor("the first message in the sink", async () => sunk(before.body.id as string), 15_000);

  // NOGOODSLAVE: the sentinel does not know the replica yet, or has not heard from it lately (a
  // starved process); asked again.
  let failoverAt = performance.now();
  let answer = "";
  await waitFor(
    "the sentinel to take the failover",
    async () => {
      failoverAt = performance.now();
      answer = await sentinel.cli("sentinel", "failover", "mailcore");
      return !answer.startsWith("NOGOODSLAVE");
    },
    10_000,
    250,
  );
  expect(answer).toBe("OK");
  await waitFor("the replica named primary", async () => (await sentinel.primaryPort()) === pair.replica.port, 20_000);
  const promotedMs = performance.now() - failoverAt;
  // Sends answer 503 until the daemon reaches the new primary; the same key settles them.
  let after = await sendEmail(stack.apiUrls[0]!, token, mail("after@dest.example"), { "Idempotency-Key": "after" });
  await waitFor(
    "a send accepted by the new primary",
    async () => {
      if (after.status !== 202)
        after = await sendEmail(stack.apiUrls[0]!, token, mail("after@dest.example"), { "Idempotency-Key": "after" });
      return after.status === 202;
    },
    20_000,
    200,
  );
  const acceptedMs = performance.now() - failoverAt;
  await waitFor("the second message in the sink", async () => sunk(after.body.id as string), 15_000);
  console.log(
    `sentinel failover: replica promoted ${Math.round(promotedMs)} ms after the command, a send accepted by the new primary after ${Math.round(acceptedMs)} ms, delivered after ${Math.round(performance.now() - failoverAt)} ms`,
  );
  const first = await getJson(`${stack.apiUrls[0]}/api/v1/emails/${before.body.id}`, token);
  expect(first.status).toBe(200);
}, 90_000);
