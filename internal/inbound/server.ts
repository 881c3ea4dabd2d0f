// The inbound MX: the platform's own addresses, where what comes back after delivery arrives.
// smtp-server, as the submission front runs it, with the submission front's guards against idle
// and hostile clients (a cap of connections per client address with a bounded waiting room,
// the idle and session time limits, the server's connection cap) and its STARTTLS; no AUTH.
// RCPT TO takes a return path the daemon made (its HMAC checked by the daemon) or a
// feedback-loop address, and nothing else; DATA reads the report (internal/feedback), hands it
// to the daemon (FeedbackService.ApplyReport) and answers with what came of it.
import type { Client } from "@connectrpc/connect";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import { addressGroup } from "../clientip/clientip";
import { MAX_REPORT_BYTES, parseReport } from "../feedback/report";
import type { FeedbackService } from "../gen/mailcore/limiter/v1/feedback_pb";
import type { Logger } from "../log/log";
import type { InboundMetrics } from "../metrics/metrics";
import { SessionSlots } from "../smtp/admission";
import { smtpError } from "../smtp/front";
import { keepOwnEnhancedCodes } from "../smtp/patches";
import { commonServerOptions } from "../smtp/server_options";
import {
  checkRecipient as oneRecipient,
  noSlotInTime,
  type Reply,
  replyLine,
  sessionExpired,
  shuttingDown,
  tooManyConnectionsFromAddress,
} from "../smtp/replies";
import { applyRequest } from "./report_request";

/** The largest message taken: a DSN may return the whole message; only its first MAX_REPORT_BYTES are read. */
export const MAX_INBOUND_BYTES = 10 * 1024 * 1024;

export interface InboundDeps {
  feedback: Pick<Client<typeof FeedbackService>, "checkRecipient" | "applyReport">;
  log: Logger;
  metrics?: InboundMetrics;
}

export interface InboundOptions {
  tls: { cert: Buffer | string; key: Buffer | string };
  /** Feedback-loop addresses (lower case). */
  fblAddresses: readonly string[];
  limiterTimeoutMs: number;
  maxClients: number;
  maxClientsPerIp: number;
  maxWaitingPerIp: number;
  socketTimeoutMs: number;
  sessionTimeoutMs: number;
  ipv6PrefixBits: number;
  name?: string;
}

const reply = (code: number, status: string, text: string): Reply => ({ code, status, text });

/** RCPT TO an address that is neither a return path of ours nor a feedback-loop address. */
const noSuchRecipient = () =>
  reply(550, "5.1.1", "No such recipient here: this server takes bounces and complaints only");
/** RCPT TO a return path whose HMAC is wrong: forged, altered, or of another key. */
const forgedReturnPath = () => reply(550, "5.7.1", "This return path was not made here (its signature is wrong)");
const unavailable = () => reply(451, "4.3.0", "Cannot check or apply this now; try again later");
const tooLargeReport = () => reply(552, "5.3.4", `Message too large: the limit is ${MAX_INBOUND_BYTES} bytes`);
const notAReport = (why: string) =>
  reply(550, "5.6.0", `Not a delivery status notification or a feedback report (${why.slice(0, 200)})`);

/** What the daemon's answer to a report calls for. */
function appliedReply(outcome: string, messageId: string): Reply {
  switch (outcome) {
    case "applied":
      return reply(250, "2.0.0", `Applied to ${messageId}`);
    case "ignored":
      return reply(250, "2.0.0", `Nothing to apply (no failed recipient) for ${messageId}`);
    case "forged":
      return reply(550, "5.7.1", "The reported message's return path was not made here (its signature is wrong)");
    case "pending":
      return reply(451, "4.3.0", "The reported message is not in the records yet; try again later");
    default:
      return reply(550, "5.1.1", "The report names no message sent from here");
  }
}

interface State {
  ip: string;
  slot: "address" | "waiting" | undefined;
  admit?: () => void;
  timer?: ReturnType<typeof setTimeout>;
  waitTimer?: ReturnType<typeof setTimeout>;
  kind?: "return-path" | "fbl";
}

export type InboundServer = SMTPServer & { drain(): void };

export function inboundServer(deps: InboundDeps, o: InboundOptions): InboundServer {
  keepOwnEnhancedCodes();
  const { log, metrics } = deps;
  const slots = new SessionSlots({
    perAddress: o.maxClientsPerIp,
    waitingPerAddress: o.maxWaitingPerIp,
    perOrganization: 1,
  });
  const states = new WeakMap<SMTPServerSession, State>();
  const call = { timeoutMs: o.limiterTimeoutMs };
  const refusal = (r: Reply) => smtpError(r);
  const closeWith = (session: SMTPServerSession, r: Reply) => {
    for (const conn of server.connections as Iterable<{
      session?: SMTPServerSession;
      send(c: number, l: string): void;
    }>)
      if (conn.session === session) conn.send(r.code, replyLine(r));
  };

  const server: SMTPServer = new SMTPServer({
    ...commonServerOptions({ ...o, banner: "mailcore inbound", size: MAX_INBOUND_BYTES }),
    authOptional: true,
    disabledCommands: ["AUTH"],
    onConnect(session, done) {
      const ip = addressGroup(session.remoteAddress, o.ipv6PrefixBits);
      const s: State = { ip, slot: undefined };
      states.set(session, s);
      const greet = () => {
        clearTimeout(s.waitTimer);
        Object.assign(s, { slot: "address", admit: undefined, waitTimer: undefined });
        s.timer = setTimeout(() => closeWith(session, sessionExpired()), o.sessionTimeoutMs);
        s.timer.unref?.();
        done();
      };
      const arrival = slots.arrive(ip, greet);
      if (arrival === "admitted") return greet();
      if (arrival === "refused")
        return done(refusal(tooManyConnectionsFromAddress(o.maxClientsPerIp, o.maxWaitingPerIp)));
      Object.assign(s, { slot: "waiting", admit: greet });
      s.waitTimer = setTimeout(() => {
        slots.stopWaiting(ip, greet);
        Object.assign(s, { slot: undefined, admit: undefined });
        done(refusal(noSlotInTime(o.socketTimeoutMs)));
      }, o.socketTimeoutMs);
      s.waitTimer.unref?.();
    },
    onClose(session) {
      const s = states.get(session);
      if (!s) return;
      states.delete(session);
      clearTimeout(s.timer);
      clearTimeout(s.waitTimer);
      if (s.slot === "waiting") slots.stopWaiting(s.ip, s.admit!);
      else if (s.slot === "address") slots.leaveAddress(s.ip);
    },
    onMailFrom(_address, _session, done) {
      done();
    },
    onRcptTo(address, session, done) {
      const s = states.get(session)!;
      const more = oneRecipient(
        session.envelope.rcptTo.map((r) => r.address),
        address.address,
      );
      if (more) return done(refusal(more));
      const rcpt = address.address.toLowerCase();
      if (o.fblAddresses.includes(rcpt)) {
        s.kind = "fbl";
        return done();
      }
      deps.feedback.checkRecipient({ address: address.address }, call).then(
        (r) => {
          if (r.accepted) {
            s.kind = "return-path";
            return done();
          }
          const forged = r.refusal === "forged";
          metrics?.recipientsRefused.inc({ reason: forged ? "forged" : "not-ours" });
          log.info("recipient refused", {
            session: session.id,
            rcpt: address.address.slice(0, 200),
            reason: r.refusal,
          });
          done(refusal(forged ? forgedReturnPath() : noSuchRecipient()));
        },
        (err: Error) => {
          metrics?.recipientsRefused.inc({ reason: "unavailable" });
          log.warn("cannot check a recipient", { session: session.id, error: err.message });
          done(refusal(unavailable()));
        },
      );
    },
    onData(stream: SMTPServerDataStream, session, done) {
      const started = performance.now();
      const chunks: Buffer[] = [];
      let kept = 0;
      stream.on("data", (chunk: Buffer) => {
        // Only the start is read (parseReport reads no more); the rest is counted and dropped.
        if (kept >= MAX_REPORT_BYTES) return;
        chunks.push(chunk);
        kept += chunk.length;
      });
      stream.on("error", () => {});
      stream.on("end", () => {
        if (stream.sizeExceeded) return done(refusal(tooLargeReport()));
        const rcpt = session.envelope.rcptTo[0]!.address;
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : "";
        handle(Buffer.concat(chunks, kept), rcpt, mailFrom)
          .then((r) => {
            log.info("report", {
              session: session.id,
              rcpt: rcpt.slice(0, 200),
              reply: `${r.code} ${r.status}`,
              said: r.text,
              ms: Math.round((performance.now() - started) * 10) / 10,
            });
            if (r.code === 250) done(null, replyLine(r));
            else done(refusal(r));
          })
          .catch((err: Error) => {
            log.error("report handling failed", { session: session.id, error: err.message });
            done(refusal(unavailable()));
          });
      });
    },
  });

  /** A report read, handed to the daemon, and the reply its outcome calls for. */
  async function handle(raw: Buffer, rcpt: string, mailFrom: string): Promise<Reply> {
    const report = await parseReport(raw, { mailFrom });
    const request = applyRequest(report, rcpt);
    if ("malformed" in request) {
      metrics?.reports.inc({ kind: "none", outcome: "malformed" });
      return notAReport(request.malformed);
    }
    try {
      const answer = await deps.feedback.applyReport(request, call);
      metrics?.reports.inc({ kind: report.kind, outcome: answer.outcome });
      return appliedReply(answer.outcome, answer.messageId);
    } catch (err) {
      metrics?.reports.inc({ kind: report.kind, outcome: "unavailable" });
      log.warn("cannot apply a report", { error: (err as Error).message });
      return unavailable();
    }
  }

  server.on("error", (err: Error & { code?: string }) => {
    log.warn("connection error", { error: err.message, code: err.code });
  });
  return Object.assign(server, {
    drain: () => {
      for (const conn of server.connections as Iterable<{ session?: SMTPServerSession }>)
        if (conn.session) closeWith(conn.session, shuttingDown());
    },
  });
}
