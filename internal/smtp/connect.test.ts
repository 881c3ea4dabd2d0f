// A connection's admission before its greeting, and what its close gives back, with the
// front's real session slots (admission.ts) and throttle (throttle.ts).
import { expect, test } from "bun:test";
import { SMTP_OPTIONS, smtpDeps, smtpSession } from "../testkit/smtpfront";
import { closed, connect, EARLY_TALKER_PAUSE_MS, greetingPauseMs, secured } from "./connect";
import { SubmissionFront } from "./front";
import { AuthThrottle } from "./throttle";

/** Connects a session; resolves with the error its greeting was refused with, null when it was greeted. */
const connected = (front: SubmissionFront, id: string, remoteAddress = "::ffff:192.0.2.7") =>
  new Promise<(Error & { responseCode?: number }) | null>((resolve) => {
    connect(front, smtpSession({ id, remoteAddress }), (err) => resolve(err ?? null));
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

test("addresses of one IPv6 /64 are one client: its slots, its waiting room and its AUTH throttle", async () => {
  const front = new SubmissionFront(smtpDeps(), { ...SMTP_OPTIONS, maxClientsPerIp: 2, maxWaitingPerIp: 0 }, () => []);
  expect(await connected(front, "a", "2001:db8:7:1::a")).toBeNull();
  expect(await connected(front, "b", "2001:db8:7:1:ffff:1:2:3")).toBeNull();
  // A third address of the same /64 finds the network's two slots taken; another /64 does not.
  expect((await connected(front, "c", "2001:db8:7:1::c"))?.responseCode).toBe(421);
  expect(await connected(front, "d", "2001:db8:7:2::d")).toBeNull();
  const throttled = new SubmissionFront(smtpDeps(), { ...SMTP_OPTIONS, authFailuresPerIp: 2 }, () => []);
  for (let i = 0; i < 3; i++) throttled.throttle.failed("2001:db8:7:1::");
  expect((await connected(throttled, "e", "2001:db8:7:1::1234"))?.message).toContain("Too many failed AUTH attempts");
  // With 128 bits, each address is a client of its own (the limits as they were).
  const apart = new SubmissionFront(
    smtpDeps(),
    { ...SMTP_OPTIONS, maxClientsPerIp: 1, maxWaitingPerIp: 0, ipv6PrefixBits: 128 },
    () => [],
  );
  expect(await connected(apart, "f", "2001:db8:7:1::f")).toBeNull();
  expect(await connected(apart, "g", "2001:db8:7:1::1f")).toBeNull();
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
