// A lease stream's room, alone: the worker's deliveries in flight, bounded, and the messages the
// lanes release ahead of their slots.
import { expect, test } from "bun:test";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { aheadOf } from "../lanes/scheduler";
import { leaseRoom } from "./delivery_service";

test("a stream holds the worker's deliveries in flight (16 unless it says, 1 to 256) and the lanes' lead", () => {
  const ahead = aheadOf(Lane.TRANSACTIONAL, 40) + aheadOf(Lane.BULK, 40);
  expect(ahead).toBe(3 + 81); // 50 ms and 2 s of slots at 40 a second, and one more each
  expect(leaseRoom(0, 40)).toBe(16 + ahead);
  expect(leaseRoom(1, 40)).toBe(1 + ahead);
  expect(leaseRoom(10_000, 40)).toBe(256 + ahead);
  expect(leaseRoom(8, 100)).toBe(8 + aheadOf(Lane.TRANSACTIONAL, 100) + aheadOf(Lane.BULK, 100));
});
