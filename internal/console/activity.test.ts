// The emails page's filters as a browser's form sends them.
import { expect, test } from "bun:test";
import { create } from "@bufbuild/protobuf";
import { GetSessionResponseSchema } from "../gen/mailcore/limiter/v1/console_pb";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { MessageInfoSchema, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { emailFilterForm, rfc3339 } from "./activity";
import { emailPage } from "./activity_pages";

test("a datetime input's value is RFC 3339 in UTC, to the minute or the second; anything else is left to the API's check", () => {
  expect(rfc3339("2026-11-28T09:30")).toBe("2026-11-28T09:30:00Z");
  expect(rfc3339("2026-11-28T09:30:15")).toBe("2026-11-28T09:30:15Z");
  expect(rfc3339("2026-11-28T09:30:00Z")).toBe("2026-11-28T09:30:00Z");
  expect(rfc3339("yesterday")).toBe("yesterday");
  expect(rfc3339("")).toBe("");
});

test("the form's filters, trimmed, missing ones empty", () => {
  const q = new URLSearchParams({ status: " bounced ", to: "kim@example.org", after: "2026-11-01T00:00" });
  expect(emailFilterForm(q)).toEqual({
    status: "bounced",
    lane: "",
    to: "kim@example.org",
    tag: "",
    after: "2026-11-01T00:00:00Z",
    before: "",
  });
});

test("a message's page shows the delayed notice and each try at a receiver", () => {
  const page = emailPage({
    session: create(GetSessionResponseSchema, { email: "ann@acme.example", orgSlug: "acme", plan: Plan.FREE }),
    message: create(MessageInfoSchema, {
      id: "msg_5f1d2c3b4a5968778695a4b3",
      status: MessageStatus.DEFERRED,
      subject: "Your code",
      events: [{ status: MessageStatus.DELAYED, atMs: 1n, detail: "not delivered 4 hours after its first attempt" }],
      deliveryAttempts: [
        {
          atMs: 1n,
          host: "mx1.example.com",
          address: "192.0.2.10",
          tls: "unverified",
          stage: "rcpt",
          reply: "451 4.7.1 Greylisted <try later>",
          enhancedCode: "4.7.1",
        },
      ],
    }),
  });
  expect(page).toContain(">delayed</span>");
  expect(page).toContain("<h2>Tries at receivers</h2>");
  expect(page).toContain('mx1.example.com <span class="mono">[192.0.2.10]</span>');
  expect(page).toContain("451 4.7.1 Greylisted &lt;try later&gt;");
});
