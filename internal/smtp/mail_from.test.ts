// MAIL FROM opens a transaction only for an authenticated session.
import { expect, test } from "bun:test";
import { SMTP_OPTIONS, smtpDeps, smtpSession } from "../testkit/smtpfront";
import { SubmissionFront } from "./front";
import { mailFrom, mailFromRefusal } from "./mail_from";

test("before AUTH: 530, saying how to authenticate (STARTTLS first on a cleartext connection)", () => {
  expect(mailFromRefusal(true, true)).toBeUndefined();
  expect(mailFromRefusal(false, true)).toMatchObject({ code: 530, status: "5.7.0" });
  expect(mailFromRefusal(false, false)?.text).toContain("STARTTLS");
});

test("a transaction is open from MAIL FROM on, for a session with a user and a token", () => {
  const front = new SubmissionFront(smtpDeps(), SMTP_OPTIONS, () => []);
  const address = { address: "news@acme.example", args: false as const };
  const anonymous = smtpSession({ id: "anonymous" });
  let refusal: (Error & { responseCode?: number }) | null | undefined;
  mailFrom(front, address, anonymous, (err) => {
    refusal = err;
  });
  expect(refusal?.responseCode).toBe(530);
  expect(front.state(anonymous).inTransaction).toBe(false);

  const signedIn = smtpSession({ id: "signed-in", user: "acme" });
  front.state(signedIn).token = `mc_${"a".repeat(43)}`;
  mailFrom(front, address, signedIn, (err) => {
    refusal = err;
  });
  expect(refusal).toBeUndefined();
  expect(front.state(signedIn).inTransaction).toBe(true);
});
