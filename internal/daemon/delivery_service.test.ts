// A lease stream's room, alone: the worker's deliveries in flight, bounded, and the messages the
// lanes release ahead of their slots. An ack under the schedule in hours, on the embedded store.
import { expect, test } from "bun:test";
import { create } from "@bufbuild/protobuf";
import { ManualClock } from "../clock/clock";
import {
  AckRequestSchema,
  DeliveryOutcome,
  Lane,
  MessageStatus,
  RetrySchedule,
} from "../gen/mailcore/limiter/v1/mail_pb";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import type { LeasedRecord } from "../hotstore/hotstore";
import { aheadOf } from "../lanes/scheduler";
import { retryPolicy } from "../mx/retry";
import { Records } from "../records/records";
import { projectSuiteOrg, suiteSends } from "../testkit/hotstores";
import { ack, type DeliveryDeps, leaseRoom } from "./delivery_service";
import { logger } from "../log/log";
import { MailRuntime } from "./mail_runtime";
import { SendingState } from "./sending_state";

const MIN = 60_000;
const HOUR = 60 * MIN;

test("a stream holds the worker's deliveries in flight (16 unless it says, 1 to 256) and the lanes' lead", () => {
  const ahead = aheadOf(Lane.TRANSACTIONAL, 40) + aheadOf(Lane.BULK, 40);
  expect(ahead).toBe(3 + 81); // 50 ms and 2 s of slots at 40 a second, and one more each
  expect(leaseRoom(0, 40)).toBe(16 + ahead);
  expect(leaseRoom(1, 40)).toBe(1 + ahead);
  expect(leaseRoom(10_000, 40)).toBe(256 + ahead);
  expect(leaseRoom(8, 100)).toBe(8 + aheadOf(Lane.TRANSACTIONAL, 100) + aheadOf(Lane.BULK, 100));
});

test("a deferral under the schedule in hours: nextRetry's time, the receiver's wait honoured, the delayed notice once, failed at the end", async () => {
  const store = new EmbeddedHot(null);
  const clock = new ManualClock();
  const org = "org_hours";
  await projectSuiteOrg(store.admission, org);
  const { send, drain } = suiteSends(() => ({ mail: store.mail, clock, org, idPrefix: "msg_hours" }));
  const records = await Records.open({ sqliteFile: ":memory:" });
  const deps: DeliveryDeps = {
    mail: store.mail,
    suppressions: records.suppressions,
    sending: new SendingState(store.mail, records, clock, logger("test")),
    tracking: { publicUrl: "http://127.0.0.1:8080", key: Buffer.alloc(32, 1) },
    runtime: new MailRuntime(),
    clock,
    laneRate: 40,
    visibilityMs: 60_000,
    policy: { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: HOUR },
    retryInHours: retryPolicy(48),
    random: () => 0.5, // no jitter on a scheduled wait, +5% on one the receiver asked for
  };
  const next = async () => {
    await store.mail.recover(clock.nowMs(), deps.policy);
    await drain(Lane.TRANSACTIONAL);
    return (await store.mail.lease(1, clock.nowMs(), 60_000))[0]!;
  };
  const defer = (l: LeasedRecord, retryAfterMs = 0n) =>
    ack(
      deps,
      create(AckRequestSchema, {
        leaseId: l.leaseId,
        messageId: l.messageId,
        orgId: l.orgId,
        outcome: DeliveryOutcome.DEFERRED,
        detail: "451 4.7.1 try again later",
        retryAfterMs,
        retrySchedule: RetrySchedule.HOURS,
        attempts: [
          { atMs: BigInt(clock.nowMs()), host: "mx.example.org", stage: "rcpt", reply: "451 4.7.1 try again later" },
        ],
      }),
    );
  const dueIn = async () => ((await store.mail.recover(clock.nowMs(), deps.policy)).nextDueMs ?? 0) - clock.nowMs();
  await send();
  const start = clock.nowMs();
  let l = await next();
  expect(await defer(l)).toMatchObject({ current: true, status: MessageStatus.DEFERRED });
  expect(await dueIn()).toBe(MIN);
  clock.advance(MIN);
  l = await next();
  await defer(l, BigInt(10 * MIN)); // "try again in 10 minutes": asked for, spread upwards only
  expect(await dueIn()).toBe(10.5 * MIN);
  clock.advance(4 * HOUR);
  l = await next();
  await defer(l);
  clock.advance(2 * HOUR);
  l = await next();
  await defer(l);
  clock.advance(start + 48 * HOUR - clock.nowMs());
  l = await next();
  expect(await defer(l)).toMatchObject({ current: true, status: MessageStatus.FAILED });
  const m = (await store.mail.getMessage(org, l.messageId))!;
  expect(m.events.filter((e) => e.status === MessageStatus.DELAYED)).toEqual([
    {
      status: MessageStatus.DELAYED,
      atMs: start + MIN + 4 * HOUR,
      detail: `not delivered 4 hours after its first attempt; tried until ${new Date(start + 48 * HOUR).toISOString()}`,
    },
  ]);
  expect(m.events.at(-1)).toMatchObject({
    status: MessageStatus.FAILED,
    detail: "not delivered 48 hours after its first attempt; the last try: 451 4.7.1 try again later",
  });
  expect(m.deliveryAttempts).toHaveLength(5);
  expect(m.deliveryAttempts![0]).toEqual({
    atMs: start,
    host: "mx.example.org",
    address: "",
    tls: "",
    stage: "rcpt",
    reply: "451 4.7.1 try again later",
    enhancedCode: "",
  });
  await store.lifecycle.close();
});
