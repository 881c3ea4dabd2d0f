import { create } from "@bufbuild/protobuf";
import { randomBytes } from "node:crypto";
import { fillTemplate } from "../automation/template";
import type { Clock } from "../clock/clock";
import { type Email, EmailSchema } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MailStore } from "../hotstore/hotstore";
import type { Fields } from "../records/audience_types";
import type { Records } from "../records/records";
import type { LoopParts } from "./leasedloop";
import type { Accept } from "./accept";

// A message to one subscriber, as campaigns and workflow emails send it: the placeholders
// filled for the subscriber, and the one-click unsubscribe of RFC 8058.

/** What the loops that send audience emails (the campaign fan-out, the workflow runner) are given. */
export interface AudienceSendParts extends LoopParts {
  /** The fan-out reads the bulk lane's depth to keep a page ahead of its release. */
  mail: Pick<MailStore, "laneCounts">;
  records: Records;
  clock: Clock;
  /** The accept step of every send (accept.ts). */
  accept: Accept;
  /** Where the unsubscribe links of the messages point (PUBLIC_URL). */
  publicUrl: string;
}

/** Why a send from fromAddress was refused for its domain. */
export function unverifiedDomain(fromAddress: string): string {
  return `${fromAddress.split("@").pop()} is not a verified sending domain of this organization`;
}

/** The message as written, with its placeholders. */
export interface MessageTemplate {
  from: string;
  fromAddress: string;
  subject: string;
  html: string;
  text: string;
}

/** An unguessable unsubscribe token (128 bits). */
export function newUnsubscribeToken(): string {
  return randomBytes(16).toString("base64url");
}

/** The message to a subscriber; its one-click unsubscribe (RFC 8058) links to /u/<token> of publicUrl. */
export function audienceEmail(
  t: MessageTemplate,
  to: { email: string; name: string; fields: Fields },
  unsubscribe: { publicUrl: string; token: string },
  requestId: string,
): Email {
  const url = `${unsubscribe.publicUrl.replace(/\/+$/, "")}/u/${unsubscribe.token}`;
  const values = { subscriber: to, unsubscribeUrl: url };
  return create(EmailSchema, {
    from: t.from,
    fromAddress: t.fromAddress,
    to: to.email,
    toAddress: to.email,
    // A name with a line break must not break the Subject header.
    subject: fillTemplate(t.subject, values, { html: false }).replace(/[\r\n]+/g, " "),
    html: fillTemplate(t.html, values, { html: true }),
    text: fillTemplate(t.text, values, { html: false }),
    headers: { "List-Unsubscribe": `<${url}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" },
    requestId,
  });
}
