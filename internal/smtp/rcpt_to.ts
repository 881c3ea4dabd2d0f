import type { SMTPServerAddress, SMTPServerSession } from "smtp-server";
import type { SubmissionFront } from "./front";
import { checkRecipient } from "./replies";

// RCPT TO: one recipient per transaction, as POST /api/v1/emails sends to one (replies.ts checkRecipient).

/** onRcptTo. */
export function rcptTo(
  front: SubmissionFront,
  address: SMTPServerAddress,
  session: SMTPServerSession,
  done: (err?: Error | null) => void,
): void {
  const refused = checkRecipient(
    session.envelope.rcptTo.map((a) => a.address),
    address.address,
  );
  done(refused ? front.refusal(refused) : null);
}
