import { describe, expect, test } from "bun:test";
import { type BounceType, classify, type RefusalInput, statusInText } from "./classify";

// [input, type, status]: replies as the large mailbox providers and common MTAs word them.
const CASES: [RefusalInput, BounceType, string | undefined][] = [
  // The mailbox's fault.
  [{ reply: 550, text: "550-5.1.1 The email account that you tried to reach does not exist." }, "hard", "5.1.1"],
  [{ status: "5.1.1", text: 'X-Postfix; unknown user: "nosuchuser"' }, "hard", "5.1.1"],
  [{ status: "5.1.2", text: "smtp; 550 5.1.2 Host unknown" }, "hard", "5.1.2"],
  [{ status: "5.1.10", text: "smtp; 556 5.1.10 Recipient address has null MX" }, "hard", "5.1.10"],
  [{ reply: 550, text: "550 5.2.1 The email account that you tried to reach is disabled." }, "hard", "5.2.1"],
  [{ status: "5.4.4", text: "Host or domain name not found" }, "hard", "5.4.4"],
  [{ reply: 550, text: "550 5.5.0 Requested action not taken: mailbox unavailable" }, "hard", "5.5.0"],
  [{ reply: 550, text: "550 5.4.1 Recipient address rejected: Access denied. [AS(201806281)]" }, "hard", "5.4.1"],
  [{ reply: 554, text: "554 delivery error: dd This user doesn't have a yahoo.com account" }, "hard", "5.0.0"],
  [{ status: "5.0.0", text: "smtp; 550 User unknown" }, "hard", "5.0.0"],
  [{ reply: 550, text: "550 No such user here" }, "hard", "5.0.0"],
  // Mailbox full is soft, permanent or not, and so is a system that is not taking mail.
  [{ reply: 552, text: "552-5.2.2 The recipient's inbox is out of storage space." }, "soft", "5.2.2"],
  [{ status: "4.2.2", text: "smtp; 452 4.2.2 Mailbox full", final: true }, "soft", "4.2.2"],
  [{ reply: 552, text: "552 Mailbox quota exceeded" }, "soft", "5.0.0"],
  [{ status: "5.3.2", text: "System not accepting network messages" }, "soft", "5.3.2"],
  [
    { status: "4.4.1", text: "connect to mx.example[192.0.2.1]:25: Connection timed out", final: true },
    "soft",
    "4.4.1",
  ],
  // A 4.x.x that ran out of retries is never hard, whatever it says.
  [{ status: "4.1.1", text: "smtp; 450 4.1.1 User unknown", final: true }, "soft", "4.1.1"],
  // The sender's or the message's problem.
  [{ reply: 554, text: "554 5.7.1 Message rejected as spam" }, "policy", "5.7.1"],
  [
    {
      reply: 550,
      text: "550-5.7.26 Unauthenticated email from example.com is not accepted due to domain's DMARC policy.",
    },
    "policy",
    "5.7.26",
  ],
  // Text never lifts a 5.7.x out of policy, not even when it names the user.
  [{ reply: 550, text: "550 5.7.1 Unknown user or blocked sender" }, "policy", "5.7.1"],
  [{ reply: 552, text: "552 5.3.4 Message size exceeds fixed maximum message size" }, "policy", "5.3.4"],
  [{ reply: 552, text: "552 5.2.3 Message exceeds maximum size" }, "policy", "5.2.3"],
  [{ reply: 554, text: "554 5.6.0 Message contains invalid header" }, "policy", "5.6.0"],
  [{ reply: 553, text: "553 5.1.8 Sender address rejected: Domain not found" }, "policy", "5.1.8"],
  [
    {
      reply: 553,
      text: "553 5.7.1 [BL21] Connections will not be accepted from 192.0.2.1, because the ip is in Spamhaus's list",
    },
    "policy",
    "5.7.1",
  ],
  [{ reply: 550, text: "550 Message rejected because it looks like spam" }, "policy", "5.0.0"],
  [{ reply: 554, text: "554 rejected: blocked using zen.spamhaus.org" }, "policy", "5.0.0"],
  // Policy words win over mailbox words: the safe direction.
  [{ reply: 550, text: "550 Blocked for spam; user unknown" }, "policy", "5.0.0"],
  [{ reply: 500, text: "500 5.5.1 Command unrecognized" }, "policy", "5.5.1"],
  // A 4xx during delivery or a delay notice: will be tried again.
  [{ reply: 451, text: "451 4.7.1 Greylisted, please try again later" }, "transient", "4.7.1"],
  [{ reply: 452, text: "452 4.2.2 Mailbox full" }, "transient", "4.2.2"],
  [{ status: "4.4.7", text: "delivery temporarily suspended", final: false }, "transient", "4.4.7"],
  [{ text: "connect ECONNREFUSED 127.0.0.1:25" }, "transient", undefined],
  // A generic permanent failure with no telling words counts as soft.
  [{ reply: 550, text: "550 Requested action not taken" }, "soft", "5.0.0"],
  [{ status: "5.0.0" }, "soft", "5.0.0"],
  [{ final: true }, "soft", undefined],
];

describe("classify", () => {
  for (const [input, type, status] of CASES) {
    test(`${JSON.stringify(input)} is ${type}`, () => {
      const c = classify(input);
      expect({ type: c.type, status: c.status }).toEqual({ type, status });
      expect(c.rule.length).toBeGreaterThan(0);
    });
  }

  test("a generic Status gives way to the diagnostic's specific code of the same class", () => {
    expect(classify({ status: "5.0.0", text: "smtp; 550 5.1.1 No such user" })).toMatchObject({
      type: "hard",
      status: "5.1.1",
    });
    // ...but not to one of another class.
    expect(classify({ status: "5.0.0", text: "smtp; 450 4.1.1 try later" }).status).toBe("5.0.0");
  });

  test("only a refusal at RCPT TO or DATA can be about the recipient", () => {
    const unknown = { reply: 550, text: "550 5.1.1 User unknown" };
    expect(classify({ ...unknown, command: "RCPT TO" }).type).toBe("hard");
    expect(classify({ ...unknown, command: "DATA" }).type).toBe("hard");
    for (const command of ["CONN", "EHLO", "AUTH PLAIN", "MAIL FROM"]) {
      expect(classify({ ...unknown, command })).toMatchObject({ type: "policy", status: "5.1.1" });
    }
    // Not final: retried, whatever the command.
    expect(classify({ reply: 421, text: "421 4.7.0 Try again later", command: "CONN" }).type).toBe("transient");
  });

  test("a success code is ignored: the failure is read from the rest", () => {
    expect(classify({ status: "2.0.0", text: "550 5.1.1 user unknown" })).toMatchObject({
      type: "hard",
      status: "5.1.1",
    });
  });
});

describe("statusInText", () => {
  const cases: [string, ReturnType<typeof statusInText>][] = [
    ["host said: 550 5.1.1 <a@b>: Recipient address rejected", { status: "5.1.1", reply: 550 }],
    ["550-5.7.1 [192.0.2.1] Our system has detected", { status: "5.7.1", reply: 550 }],
    ["Sorry, no mailbox here by that name. (#5.1.1)", { status: "5.1.1" }],
    // A reply of one class with a code of another is not a pair; the code alone is still read.
    ["550 4.2.2 odd", { status: "4.2.2" }],
    ["<bob@b.example>: 550 User unknown", { status: "5.0.0", reply: 550 }],
    // Dotted numbers that are not status codes.
    ["relay 5.1.1.1 is down, version 4.2.10.1", undefined],
    ["sent 550 bytes", undefined],
    ["nothing here", undefined],
  ];
  for (const [text, want] of cases) test(JSON.stringify(text), () => expect(statusInText(text)).toEqual(want));

  test("reads a bounded prefix of a long text", () => {
    expect(statusInText(`${"x ".repeat(10_000)}550 5.1.1 late`)).toBeUndefined();
  });
});
