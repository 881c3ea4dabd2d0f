import type { MessageInitShape } from "@bufbuild/protobuf";
import { addressIn, first } from "../feedback/fields";
import type { Report } from "../feedback/report";
import type { ApplyReportRequestSchema } from "../gen/mailcore/limiter/v1/feedback_pb";

// A report read by internal/feedback, as the daemon is handed it (FeedbackService.ApplyReport):
// what ties it to its message (the envelope recipient, Original-Mail-From, the returned
// message's Message-ID and recipients) and, per recipient of a DSN, its classification.

export type ApplyRequest = MessageInitShape<typeof ApplyReportRequestSchema>;

/** The request for a report that came to envelopeRecipient; a reason when it is no report. */
export function applyRequest(report: Report, envelopeRecipient: string): ApplyRequest | { malformed: string } {
  if (report.kind === "none") return { malformed: report.reason };
  const original = report.kind === "dsn" ? report.dsn.original : report.arf.original;
  const base = { envelopeRecipient, kind: report.kind, originalMessageId: original?.messageId ?? "" };
  if (report.kind === "dsn")
    return {
      ...base,
      recipients: report.dsn.recipients.map((r) => ({
        finalRecipient: r.finalRecipient ?? "",
        action: r.action ?? "",
        status: r.status ?? "",
        diagnostic: r.diagnostic?.text ?? "",
        type: r.classification?.type ?? "",
      })),
    };
  const to = original ? addressIn(first(original.headers, "to")) : undefined;
  return {
    ...base,
    originalMailFrom: report.arf.originalMailFrom ?? "",
    feedbackType: report.arf.feedbackType ?? "",
    originalRecipients: [...report.arf.originalRcptTo, ...(to?.includes("@") ? [to] : [])],
  };
}
