// The activity log's filter of a request, alone: only what the request sets, and a status or
// lane that is none refused.
import { expect, test } from "bun:test";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { messageFilter } from "./mail_service";

const none = {
  status: MessageStatus.UNSPECIFIED,
  toMailbox: "",
  tag: "",
  lane: Lane.UNSPECIFIED,
  afterMs: 0n,
  beforeMs: 0n,
};

test("a filter holds only what the request sets", () => {
  expect(messageFilter(none)).toEqual({});
  expect(
    messageFilter({
      status: MessageStatus.BOUNCED,
      toMailbox: "kim@example.org",
      tag: "welcome",
      lane: Lane.BULK,
      afterMs: 1n,
      beforeMs: 2n,
    }),
  ).toEqual({
    status: MessageStatus.BOUNCED,
    toMailbox: "kim@example.org",
    tag: "welcome",
    lane: Lane.BULK,
    afterMs: 1,
    beforeMs: 2,
  });
});

test("a status or lane that is none is refused", () => {
  expect(() => messageFilter({ ...none, status: 99 as MessageStatus })).toThrow("status is not a message status");
  expect(() => messageFilter({ ...none, lane: 7 as Lane })).toThrow("lane must be transactional or bulk");
});
