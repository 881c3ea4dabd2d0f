// What the front keeps across connections, and how it closes them: at once when idle, after the
// reply to the transaction under way otherwise.
import { describe, expect, test } from "bun:test";
import type { SMTPServerSession } from "smtp-server";
import { SMTP_OPTIONS, smtpDeps, smtpSession } from "../testkit/smtpfront";
import { type OpenConnection, SubmissionFront } from "./front";
import { replyLine, sessionExpired, shuttingDown } from "./replies";

const deps = smtpDeps();
const options = SMTP_OPTIONS;

/** A connection that records what the front does to it. */
function connection(session?: SMTPServerSession) {
  const conn = {
    session,
    sent: [] as [number, string][],
    closed: false,
    send(code: number, line: string) {
      conn.sent.push([code, line]);
    },
    close() {
      conn.closed = true;
    },
  } satisfies OpenConnection & Record<string, unknown>;
  return conn;
}

describe("closing a connection", () => {
  const a = smtpSession({ id: "a" });
  const b = smtpSession({ id: "b" });

  test("idle: the 421 goes out at once, to that connection only", () => {
    const conns = [connection(a), connection(b)];
    const front = new SubmissionFront(deps, options, () => conns);
    front.closeWhenIdle(a, sessionExpired());
    expect(conns[0]!.sent).toEqual([[421, replyLine(sessionExpired())]]);
    expect(conns[1]!.sent).toEqual([]);
  });

  test("in a transaction: nothing now, the reply kept for after the transaction's answer", () => {
    const conns = [connection(a)];
    const front = new SubmissionFront(deps, options, () => conns);
    front.state(a).inTransaction = true;
    front.closeWhenIdle(a, sessionExpired());
    expect(conns[0]!.sent).toEqual([]);
    expect(front.state(a).closeWith).toEqual(sessionExpired());
  });

  test("without a reply: closed once its last reply is out", () => {
    const conns = [connection(a)];
    new SubmissionFront(deps, options, () => conns).closeSession(a);
    expect([conns[0]!.sent, conns[0]!.closed]).toEqual([[], true]);
  });

  test("drain: every connection with a session gets the shutdown reply when idle", () => {
    const conns = [connection(a), connection(b), connection()];
    const front = new SubmissionFront(deps, options, () => conns);
    front.state(b).inTransaction = true;
    front.drain(shuttingDown());
    expect(conns.map((c) => c.sent.length)).toEqual([1, 0, 0]);
    expect(front.state(b).closeWith).toEqual(shuttingDown());
  });
});

test("a connection's state lives until it is forgotten", () => {
  const front = new SubmissionFront(deps, options, () => []);
  const s = smtpSession();
  front.state(s).failures = 2;
  expect(front.state(s).failures).toBe(2);
  expect(front.forget(s)?.failures).toBe(2);
  expect(front.forget(s)).toBeUndefined();
  expect(front.state(s).failures).toBe(0);
});
