// The answers to a send, from the daemon's outcome: what the client is told was queued, and
// how to retry when the daemon did not say.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, test } from "bun:test";
import { EmailSchema, Lane, SendOutcome, SendResponseSchema } from "../gen/mailcore/limiter/v1/mail_pb";
import type { SendInput } from "./send_request";
import { NotQueued } from "./ports";
import { sendAnswer, sendUnconfirmed } from "./send";

const input: SendInput = {
  lane: Lane.BULK,
  email: create(EmailSchema, { fromAddress: "news@acme.example" }),
  fingerprint: "f",
};
const answer = async (outcome: SendOutcome) => {
  const res = sendAnswer(create(SendResponseSchema, { outcome, messageId: "msg_1", retryAfterSeconds: 30 }), input, {
    "X-Request-Id": "req_1",
  });
  return {
    status: res.status,
    headers: Object.fromEntries(res.headers),
    body: (await res.json()) as Record<string, any>,
  };
};

describe("a send the daemon answered", () => {
  test("accepted: 202 queued, in its lane", async () => {
    expect(await answer(SendOutcome.ACCEPTED)).toEqual({
      status: 202,
      headers: { "x-request-id": "req_1", "content-type": "application/json" },
      body: { id: "msg_1", status: "queued", lane: "bulk" },
    });
  });

  test("replayed: the first answer again, marked as a replay", async () => {
    const replayed = await answer(SendOutcome.REPLAYED);
    expect(replayed.status).toBe(202);
    expect(replayed.headers["idempotent-replayed"]).toBe("true");
    expect(replayed.body).toEqual({ id: "msg_1", status: "queued", lane: "bulk" });
  });

  test("refused: the key reused (409), the domain not verified (403), the recipient limited (429)", async () => {
    expect((await answer(SendOutcome.IDEMPOTENCY_CONFLICT)).body).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    const domain = await answer(SendOutcome.DOMAIN_NOT_VERIFIED);
    expect(domain.status).toBe(403);
    expect(domain.body.message).toStartWith("acme.example is not a verified sending domain");
    const limited = await answer(SendOutcome.RECIPIENT_LIMITED);
    expect(limited.status).toBe(429);
    expect(limited.headers["retry-after"]).toBe("30");
  });

  test("an outcome the front does not know is a failure, not an answer", () => {
    expect(() => sendAnswer(create(SendResponseSchema, { outcome: 99 as SendOutcome }), input, {})).toThrow(
      "unknown send outcome 99",
    );
  });
});

test("a send the daemon did not confirm: 503; only its own refusal says nothing was queued", async () => {
  const notQueued = sendUnconfirmed(new NotQueued("late"), {});
  const lost = sendUnconfirmed(new ConnectError("gone", Code.Unavailable), {});
  expect([notQueued.status, lost.status]).toEqual([503, 503]);
  expect(notQueued.headers.get("Retry-After")).toBe("1");
  expect(((await notQueued.json()) as { message: string }).message).toContain("nothing was queued");
  expect(((await lost.json()) as { message: string }).message).toContain("may or may not have been queued");
});
