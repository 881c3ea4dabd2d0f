// A connection's admission before its greeting, and what its close gives back, with the
// front's real session slots (admission.ts) and throttle (throttle.ts).
import { expect, test } from "bun:test";
import { SMTP_OPTIONS, smtpDeps, smtpSession } from "../testkit/smtpfront";
import { closed, connect, EARLY_TALKER_PAUSE_MS, greetingPauseMs, secured } from "./connect";
import { SubmissionFront } from "./front";
import { AuthThrottle } from "./throttle";

/** Connects a session; resolves with the error its greeting was refused with, null when it was greeted. */
const connected = (front: SubmissionFront, id: string) =>
  new Promise<(Error & { responseCode?: number }) | null>((resolve) => {
    connect(front, smtpSession({ id, remoteAddress: "::ffff:192.0.2.7" }), (err) => resolve(err ?? null));
  });

test("the greeting is held only for an address with failed AUTH attempts not yet drained", () => {
  const throttle = new AuthThrottle(5);
  expect(greetingPauseMs(throttle, "192.0.2.7")).toBe(0);
  throttle.failed("192.0.2.7");
  expect(greetingPauseMs(throttle, "192.0.2.7")).toBe(EARLY_TALKER_PAUSE_MS);
  expect(greetingPauseMs(throttle, "192.0.2.8")).toBe(0);
});

test("an address's slots, then its waiting room, then 421; a close greets the one waiting longest", async () => {
  const front = new SubmissionFront(smtpDeps(), { ...SMTP_OPTIONS, maxClientsPerIp: 2, maxWaitingPerIp: 1 }, () => []);
  const sessions: string[] = [];
  const greet = (id: string) => {
    sessions.push(id);
    return connected(front, id);
  };
  expect(await greet("a")).toBeNull();
  expect(await greet("b")).toBeNull();
  let waitingGreeted = false;
  const waiting = greet("c").then((err) => {
    waitingGreeted = err === null;
  });
  const refused = await greet("d");
  expect(refused?.responseCode).toBe(421);
  expect(refused?.message).toStartWith("4.7.0 Too many connections from your address");
  expect(waitingGreeted).toBe(false);
  // "a" closes: its slot goes to "c".
  const a = smtpSession({ id: "a" });
  front.state(a).slot = "address";
  front.state(a).ip = "192.0.2.7";
  closed(front, a);
  await waiting;
  expect(waitingGreeted).toBe(true);
  for (const id of ["b", "c"]) closed(front, smtpSession({ id }));
});

test("a throttled address is refused before its greeting", async () => {
  const front = new SubmissionFront(smtpDeps(), { ...SMTP_OPTIONS, authFailuresPerIp: 2 }, () => []);
  for (let i = 0; i < 3; i++) front.throttle.failed("192.0.2.7");
  const err = await connected(front, "a");
  expect(err?.responseCode).toBe(421);
  expect(err?.message).toContain("Too many failed AUTH attempts");
});

test("AUTH is offered only after STARTTLS", async () => {
  const front = new SubmissionFront(smtpDeps(), SMTP_OPTIONS, () => []);
  const session = smtpSession({ id: "tls" });
  await new Promise<void>((done) => connect(front, session, () => done()));
  expect(session.disabledCommands).toEqual(["AUTH"]);
  secured(session, () => {});
  expect(session.disabledCommands).toBeUndefined();
  closed(front, session);
});
