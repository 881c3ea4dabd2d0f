// test-runner: alone
// A send is answered 202 only once a replica has it: limiterd, the API and a worker as processes
// on a redis-server with a replica of its own, the replica stopped (SIGSTOP) as a partition would.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import {
  getJson,
  type RedisServer,
  sendEmail,
  type Stack,
  startRedis,
  startRedisWithReplica,
  startStack,
  waitFor,
} from "../../testkit/testkit";
import { projectSuiteOrg, releaseNext, SUITE_POLICY, SUITE_QUEUE_CAP } from "../../testkit/hotstores";
import { GUARD_LIMITS } from "../../mail/policy";
import { DeliveryOutcome, Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import type { HotStore } from "../hotstore";
import { keys } from "./layout";
import { connectRedis, RedisHot, waitingCommandTimeoutMs } from "./redis";

const mail = (to: string) => ({ from: `Acme <no-reply@wait.example>`, to, subject: `To ${to}`, text: "hello" });

const sunk = (stack: Stack, id: string) => existsSync(join(stack.dataDir, "sink", `${id}.eml`));

describe("a Redis primary with a replica", () => {
  let pair: Awaited<ReturnType<typeof startRedisWithReplica>>;
  let stack: Stack;
  let token: string;
  beforeAll(async () => {
    pair = await startRedisWithReplica();
    // The wait's timeout well under the fronts' deadline on the daemon (5 s in the stacks of tests).
    stack = await startStack({ redisUrl: pair.primary.url, workers: 1, env: { REDIS_WAIT_TIMEOUT_MS: "1500" } });
    token = await stack.org("wait", "enterprise");
  }, 60_000);
  afterAll(async () => {
    pair?.replica.resume();
    await stack?.stop();
    await pair?.stop();
  });

  test("the daemon found the replica and waits for it", async () => {
    await waitFor("the daemon's start line", async () => stack.limiterd.stderr().includes('"replicas":1'));
    const sent = await sendEmail(stack.apiUrls[0]!, token, mail("first@dest.example"));
    expect(sent.status).toBe(202);
    await waitFor("the first message in the sink", async () => sunk(stack, sent.body.id as string));
  });

  test("cut off from its replica: 503 within the wait, admission unhindered; back: the retry is accepted once", async () => {
    pair.replica.pause();
    const key = { "Idempotency-Key": "partitioned-1" };
    const started = performance.now();
    let refusedAt = Number.POSITIVE_INFINITY;
    const sending = sendEmail(stack.apiUrls[0]!, token, mail("cut@dest.example"), key).then((answer) => {
      refusedAt = performance.now();
      return answer;
    });
    // Admission is on a connection of its own: a request admitted while the WAIT holds the send
    // (1.5 s, however loaded the machine) is answered before the send is.
    const probe = await connectRedis(pair.primary.url);
    await waitFor("the WAIT on the primary", async () => /^blocked_clients:[1-9]/m.test(await probe.info("clients")));
    probe.disconnect();
    const tags = await getJson(`${stack.apiUrls[0]}/api/v1/tags`, token);
    const tagsAt = performance.now();
    const refused = await sending;
    const tookMs = performance.now() - started;
    expect(tags.status).toBe(200);
    expect(tagsAt).toBeLessThan(refusedAt);
    expect(refused.status).toBe(503);
    expect(String(refused.body.message)).toContain("may or may not have been queued");
    expect(tookMs).toBeGreaterThanOrEqual(1_500);
    expect(tookMs).toBeLessThan(5_000);

    pair.replica.resume();
    const retried = await sendEmail(stack.apiUrls[0]!, token, mail("cut@dest.example"), key);
    expect(retried.status).toBe(202);
    expect(retried.headers.get("idempotent-replayed")).toBe("true");
    const id = retried.body.id as string;
    await waitFor("the retried message in the sink", async () => sunk(stack, id), 20_000);
    const again = await sendEmail(stack.apiUrls[0]!, token, mail("cut@dest.example"), key);
    expect(again.body.id).toBe(id);
    // Once: one file for the one message accepted to that recipient.
    await Bun.sleep(500);
    const files = readdirSync(join(stack.dataDir, "sink")).filter((f) => f.endsWith(".eml"));
    expect(files.filter((f) => f.startsWith(id))).toHaveLength(1);
    expect(files).toHaveLength(2);
  }, 60_000);
});

describe("detecting the replicas", () => {
  let lone: RedisServer;
  let pair: Awaited<ReturnType<typeof startRedisWithReplica>>;
  beforeAll(async () => {
    [lone, pair] = await Promise.all([startRedis(), startRedisWithReplica()]);
  }, 30_000);
  afterAll(async () => {
    pair?.replica.resume();
    await Promise.all([lone?.stop(), pair?.stop()]);
  });

  let sent = 0;
  /** Accepts one message (a write for the WAIT to confirm). */
  const accept = async (hot: HotStore) => {
    await projectSuiteOrg(hot.admission, "o1");
    const id = `m${++sent}`;
    return hot.mail.enqueue(
      {
        orgId: "o1",
        tags: [],
        messageId: id,
        lane: Lane.BULK,
        payload: "{}",
        from: "s@d.example",
        to: "u@example.com",
        subject: id,
        fromDomain: "d.example",
        mailbox: "u@example.com",
        checkCooldown: false,
        countGuards: false,
        guards: GUARD_LIMITS,
        queueCap: SUITE_QUEUE_CAP,
      },
      Date.now(),
    );
  };

  const open = async (url: string, replicas: number | "detect") => {
    const hot = new RedisHot(await connectRedis(url), {
      policy: { replicas, timeoutMs: 200 },
      writer: await connectRedis(url, { commandTimeoutMs: waitingCommandTimeoutMs(200) }),
    });
    await hot.ready();
    return hot;
  };

  test("a primary without replicas: no wait", async () => {
    const hot = await open(lone.url, "detect");
    expect(hot.waitingFor()).toBe(0);
    expect((await accept(hot)).kind).toBe("accepted");
    await hot.lifecycle.close();
  });

  test("a primary with one: 1, and still 1 while the replica is cut off", async () => {
    const hot = await open(pair.primary.url, "detect");
    expect(hot.waitingFor()).toBe(1);
    pair.replica.pause();
    await Bun.sleep(1_200); // the next change looks at the replicas again first
    expect(hot.waitingFor()).toBe(1);
    await expect(accept(hot)).rejects.toThrow("0 of 1 replicas confirmed the change within 200 ms");
    pair.replica.resume();
    expect((await accept(hot)).kind).toBe("accepted");
    await hot.lifecycle.close();
  });

  test("a replica that connects later: the next change looks again and waits for it, and the watcher is told", async () => {
    const primary = await startRedis();
    let replica: RedisServer | undefined;
    try {
      const hot = await open(primary.url, "detect");
      expect(hot.waitingFor()).toBe(0);
      const told: number[] = [];
      hot.watchWaiting((replicas) => told.push(replicas));
      replica = await startRedis({ replicaOf: primary });
      const direct = await connectRedis(primary.url);
      await waitFor("the replica in sync", async () => (await direct.info("replication")).includes("state=online"));
      direct.disconnect();
      await Bun.sleep(1_000); // the count is a second old: the next change looks first
      expect((await accept(hot)).kind).toBe("accepted");
      expect(hot.waitingFor()).toBe(1);
      expect(told).toEqual([1]);
      await hot.lifecycle.close();
    } finally {
      await Promise.all([replica?.stop(), primary.stop()]);
    }
  }, 20_000);

  test("a count given: waited for even where no replica is (every change refused)", async () => {
    const hot = await open(lone.url, 1);
    await expect(accept(hot)).rejects.toThrow("0 of 1 replicas confirmed");
    await hot.lifecycle.close();
  });

  test("a lease the replicas did not confirm still hands out its messages (else they wait out the visibility timeout)", async () => {
    const direct = await connectRedis(lone.url);
    await direct.flushall(); // only this test's message in the lanes
    direct.disconnect();
    const hot = await open(lone.url, 1);
    // The enqueue and the release ran on the primary; neither was confirmed.
    await expect(accept(hot)).rejects.toThrow("0 of 1 replicas confirmed");
    await expect(releaseNext(hot.mail, Lane.BULK, Date.now())).rejects.toThrow("0 of 1 replicas confirmed");
    const leased = await hot.mail.lease(10, Date.now(), 60_000);
    expect(leased.map((l) => [l.messageId, l.lane, l.attempt])).toEqual([[`m${sent}`, Lane.BULK, 1]]);
    await hot.lifecycle.close();
  });

  test("an ack that changes nothing is kept only once the replica has it, or fails as the ack does", async () => {
    const hot = await open(pair.primary.url, "detect");
    const replica = await connectRedis(pair.replica.url);
    const ack = (messageId: string) =>
      hot.mail.ack(
        { orgId: "o1", messageId, leaseId: "ls_lost", outcome: DeliveryOutcome.DELIVERED, detail: "250 ok" },
        SUITE_POLICY,
        Date.now(),
      );
    try {
      // Its message gone (a failover, a FLUSHALL): the kept ack is all the reconciliation will know.
      pair.replica.pause();
      await expect(ack("gone")).rejects.toThrow("0 of 1 replicas confirmed the change within 200 ms");
      pair.replica.resume();
      expect(await ack("gone")).toEqual({ current: false, status: 0 });
      // Its lease lost: the message went to another worker.
      const accepted = await accept(hot);
      expect(accepted.kind).toBe("accepted");
      expect((await ack(`m${sent}`)).current).toBe(false);
      for (const id of ["gone", `m${sent}`])
        expect(await replica.get(keys.keptAck("o1", id))).toBe(`${DeliveryOutcome.DELIVERED}|250 ok`);
    } finally {
      pair.replica.resume();
      replica.disconnect();
      await hot.lifecycle.close();
    }
  });
});
