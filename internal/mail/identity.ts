import { randomBytes } from "node:crypto";
// Apart from the sending rules (policy.ts), which load the generated code: the admin CLI's import
// compares emails as the daemon does and loads nothing else.

/** How an email address is compared as an identity (a subscriber, a console user): trimmed and lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** A new message id: `msg_` and 96 random bits in lower-case hex (the Message-ID's left part, and the return path's). */
export function newMessageId(): string {
  return `msg_${randomBytes(12).toString("hex")}`;
}
