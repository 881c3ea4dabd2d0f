import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import type {
  ApplyReportRequest,
  ApplyReportResponseSchema,
  CheckRecipientRequest,
  FeedbackService,
  ReportedRecipient,
} from "../gen/mailcore/limiter/v1/feedback_pb";
import type { MailStore } from "../hotstore/hotstore";
import { MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { bounceDetail } from "../mail/bounce_detail";
import { normalizeMailbox } from "../mail/policy";
import type { Logger } from "../log/log";
import type { LimiterMetrics } from "../metrics/metrics";
import type { Records } from "../records/records";
import { parseReturnPath } from "../returnpath/returnpath";
import { guard } from "./rpc_errors";
import type { SendingState } from "./sending_state";

// The feedback service (FeedbackService, for the inbound MX): whether an address is one of our
// return paths, and the bounces and complaints that come back, applied to the message they are
// tied to. The tie: the return path's HMAC (the envelope recipient of a bounce, a complaint's
// Original-Mail-From), which only the daemon can make; else the returned message's Message-ID,
// believed only when the report names that message's own recipient. A forged return path is
// never applied, and never falls back to the Message-ID.

/**
 * Past this complaint rate over the last 24 hours an organization's bulk sends are paused until
 * an operator resumes them (mailbox providers block senders above 0.3%), once it delivered at
 * least minDelivered in that window (below it, one complaint says too little).
 */
export const COMPLAINT_PAUSE = { rate: 0.003, minDelivered: 1_000 };

export interface FeedbackDeps {
  mail: Pick<MailStore, "coolDown">;
  records: Pick<Records, "history" | "suppressions" | "audience" | "webhookDeliveries" | "complaints" | "directory">;
  log: Logger;
  metrics?: Pick<LimiterMetrics, "complaintRate">;
  /** The hot store's copy of the lists and pauses, which the accept step reads. */
  sending: Pick<SendingState, "listed" | "bulkPaused">;
  /** COMPLAINT_PAUSE unless a test gives its own. */
  pause?: typeof COMPLAINT_PAUSE;
  clock: Clock;
  /** The return paths' HMAC key: masterKey.derive("return-path"). */
  returnPathKey: Uint8Array;
  /** The spec's bounce cooldown of a mailbox that bounced hard. */
  bounceCooldownMs: number;
}

/** FeedbackService's methods, by name. */
export function feedbackHandlers(deps: FeedbackDeps): ServiceImpl<typeof FeedbackService> {
  return {
    checkRecipient: async (req) => checkRecipient(deps, req),
    applyReport: (req) => applyReport(deps, req),
    resumeBulk: async (req) => ({
      resumed: await guard(async () => {
        const { id } = await deps.records.directory.getOrganization(req.slug);
        const resumed = await deps.records.complaints.resume(id);
        await deps.sending.bulkPaused(id, null);
        return resumed;
      }),
    }),
  };
}

export function checkRecipient(deps: Pick<FeedbackDeps, "returnPathKey">, req: CheckRecipientRequest) {
  const parsed = parseReturnPath(req.address, deps.returnPathKey);
  return parsed.ok ? { accepted: true, refusal: "" } : { accepted: false, refusal: parsed.code };
}

/** A message a report is tied to: its organization and recipient, and how it was tied. */
interface Tie {
  messageId: string;
  orgId: string;
  toMailbox: string;
  tiedBy: "return-path" | "message-id";
}

/** The platform's Message-ID of a message: "<id>@<domain>"; the id's part when it is one of ours. */
function ourMessageId(messageId: string): string | undefined {
  const m = /^(msg_[0-9a-f]{24})@/.exec(messageId.trim().toLowerCase());
  return m?.[1];
}

/** The message a report is about, or why there is none ("forged", "untied"). */
async function tie(deps: FeedbackDeps, req: ApplyReportRequest): Promise<Tie | "forged" | "untied" | "pending"> {
  const returnPath = req.kind === "arf" ? req.originalMailFrom : req.envelopeRecipient;
  if (returnPath) {
    const parsed = parseReturnPath(returnPath, deps.returnPathKey);
    if (parsed.ok) {
      const owner = await deps.records.history.recipientOf(parsed.messageId);
      // A return path only the daemon makes, of a message the records writer has not copied yet
      // (it is a second or two behind when healthy): the sender is asked to come back later.
      return owner ? { messageId: parsed.messageId, ...owner, tiedBy: "return-path" } : "pending";
    }
    if (parsed.code === "forged") return "forged";
  }
  // The fallback: the returned message's own Message-ID, and its recipient named by the report.
  const id = ourMessageId(req.originalMessageId);
  if (!id) return "untied";
  const owner = await deps.records.history.recipientOf(id);
  if (!owner) return "untied";
  const named =
    req.kind === "arf" ? req.originalRecipients : req.recipients.map((r: ReportedRecipient) => r.finalRecipient);
  if (!named.some((a) => a.includes("@") && normalizeMailbox(a.trim()) === owner.toMailbox)) return "untied";
  return { messageId: id, ...owner, tiedBy: "message-id" };
}

/** The organization's complaint rate, in the metrics; its bulk sends paused past the limit. */
async function pauseOverLimit(deps: FeedbackDeps, orgId: string, at: number): Promise<void> {
  const { rate, delivered, complained } = await deps.records.complaints.rate(orgId, at);
  deps.metrics?.complaintRate.set({ org: orgId }, rate);
  const limit = deps.pause ?? COMPLAINT_PAUSE;
  if (delivered < limit.minDelivered || rate <= limit.rate) return;
  const reason = `complaint rate ${(rate * 100).toFixed(2)}% (${complained} of ${delivered} delivered in 24 hours) over ${limit.rate * 100}%`;
  await deps.records.complaints.pause(orgId, reason, at);
  await deps.sending.bulkPaused(orgId, (await deps.records.complaints.paused(orgId))?.reason ?? reason);
  deps.log.warn("bulk sends paused for complaints; an operator resumes them (admin org resume-bulk)", {
    org: orgId,
    reason,
  });
}

/** The recipient of a DSN that is about the message's recipient and failed for good; the first failed one otherwise. */
function failedRecipient(req: ApplyReportRequest, toMailbox: string): ReportedRecipient | undefined {
  const failed = req.recipients.filter((r) => r.type === "hard" || r.type === "soft" || r.type === "policy");
  return (
    failed.find((r) => r.finalRecipient.includes("@") && normalizeMailbox(r.finalRecipient) === toMailbox) ?? failed[0]
  );
}

/**
 * How long a report waits, in the background, for the records to hold its message as final: a
 * DSN can come back within a second of the 250, before the records writer has copied the
 * delivery (it is a second or two behind when healthy).
 */
const LATE_HISTORY_WAIT_MS = 30_000;
const LATE_HISTORY_EVERY_MS = 500;

/**
 * What came back, in the message's history (with the status it makes of a delivered message).
 * When the records do not hold the message as final yet, tried again in the background (the
 * report's other effects and its reply do not wait), and said in the log if it never is.
 */
async function inHistory(deps: FeedbackDeps, id: string, atMs: number, detail: string, status?: MessageStatus) {
  const add = () => deps.records.history.addAfterDelivery(id, atMs, detail, status);
  if (await add()) return;
  const deadline = Date.now() + LATE_HISTORY_WAIT_MS;
  const retry = async () => {
    const added = await add().catch((err: Error) => {
      deps.log.warn("a report's history entry not written yet", { message: id, error: err.message });
      return false;
    });
    if (added) return;
    if (Date.now() < deadline) setTimeout(retry, LATE_HISTORY_EVERY_MS);
    else
      deps.log.warn("a report about a message not final in the records is not in its history", { message: id, detail });
  };
  setTimeout(retry, LATE_HISTORY_EVERY_MS);
}

type Applied = MessageInitShape<typeof ApplyReportResponseSchema>;

export async function applyReport(deps: FeedbackDeps, req: ApplyReportRequest): Promise<Applied> {
  const tied = await guard(() => tie(deps, req));
  if (tied === "forged" || tied === "untied" || tied === "pending") return { outcome: tied };
  const at = deps.clock.nowMs();
  const base = { messageId: tied.messageId, tiedBy: tied.tiedBy };
  if (req.kind === "arf") {
    const { suppressed } = await guard(async () => {
      const made = await deps.records.suppressions.recordComplaint({
        orgId: tied.orgId,
        messageId: tied.messageId,
        email: tied.toMailbox,
        feedbackType: req.feedbackType,
        atMs: at,
      });
      // A subscriber who complained gets no more of the organization's mail.
      await deps.records.audience.update(
        tied.orgId,
        tied.toMailbox,
        { status: "unsubscribed", triggerWorkflows: false },
        at,
      );
      if (made.suppressed) await deps.sending.listed(tied.orgId, tied.toMailbox, "complaint");
      // The message's status stays (it was delivered); its history says it was reported.
      await inHistory(
        deps,
        tied.messageId,
        at,
        `complaint${req.feedbackType ? ` (${req.feedbackType})` : ""} from a feedback loop`,
      );
      await pauseOverLimit(deps, tied.orgId, at);
      return made;
    });
    return { ...base, outcome: "applied", applied: "complaint", suppressed };
  }
  const r = failedRecipient(req, tied.toMailbox);
  if (!r) return { ...base, outcome: "ignored" };
  const bounce = { type: r.type as "hard" | "soft" | "policy", status: r.status, diagnostic: r.diagnostic };
  const effect = await guard(async () => {
    // The spec's cooldown is the mailbox's, for every organization: a hard bounce only.
    if (bounce.type === "hard") await deps.mail.coolDown(tied.toMailbox, at, deps.bounceCooldownMs);
    // A delivered message bounced after all: bounced (hard) or failed (soft, policy), as a refusal during delivery makes it.
    const status = bounce.type === "hard" ? MessageStatus.BOUNCED : MessageStatus.FAILED;
    await inHistory(deps, tied.messageId, at, bounceDetail(bounce), status);
    await deps.records.webhookDeliveries.enqueue(
      {
        orgId: tied.orgId,
        type: "email.bounced",
        atMs: at,
        data: { emailId: tied.messageId, to: tied.toMailbox, source: "dsn", bounce },
      },
      at,
    );
    const made = await deps.records.suppressions.recordBounce({
      orgId: tied.orgId,
      messageId: tied.messageId,
      email: tied.toMailbox,
      bounce,
      atMs: at,
    });
    if (made.suppressed)
      await deps.sending.listed(tied.orgId, tied.toMailbox, bounce.type === "hard" ? "hard_bounce" : "soft_bounce");
    return made;
  });
  return { ...base, outcome: "applied", applied: bounce.type, suppressed: effect.suppressed };
}
