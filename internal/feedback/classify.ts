// What a refusal or a failed delivery means for the mailbox: one classification for delivery
// status notifications (RFC 3464) and for refusals during delivery (the relay, the MX client).
//
//   hard       the mailbox's fault, for good: it does not exist, is disabled, its domain takes
//              no mail (X.1.1, X.1.2, X.1.3, X.1.6, X.1.10, X.2.1, X.4.4, X.7.17, X.7.18).
//   soft       the message was not delivered, for a reason of the mailbox or its system that
//              may pass: mailbox full (X.2.2, permanent or not), mail system full, a destination
//              that stayed unreachable until the retries ran out. Counts towards suppression
//              only when it repeats (softbounces.ts).
//   policy     the sender's or the message's problem, never the mailbox's: content and policy
//              refusals (X.7.x, spam, block lists, authentication), a message too big (X.2.3,
//              X.3.4), media (X.6.x), protocol (X.5.x), the sender's address (X.1.7, X.1.8).
//              Never puts the mailbox on cooldown for anyone.
//   transient  not a final failure: a 4xx that will be retried, a delay notice.
//
// A refusal in a dialogue before RCPT TO (the greeting, EHLO, AUTH, MAIL FROM) is policy whatever
// its code: it cannot be about the recipient.
//
// An enhanced status code of the table below (RFC 3463 and the IANA registry of RFC 5248) decides
// alone. Any other (a generic X.0.0, X.1.0, X.5.0, a 5.4.1, a bare reply code read as C.0.0, or
// none) is decided by the words of the reply's text, then by the code's subject. The text never
// turns an X.7.x into anything but policy, and a 4.x.x is never hard.

export type BounceType = "hard" | "soft" | "policy" | "transient";

export interface Classification {
  type: BounceType;
  /** The enhanced status code the decision rests on ("5.1.1"); "5.0.0" from a bare 550; undefined when there was none. */
  status: string | undefined;
  /** Why, in a few words ("5.2.2: mailbox full"), for logs and tests. */
  rule: string;
}

export interface RefusalInput {
  /** An enhanced status code as reported (a DSN's Status field); ignored unless it reads C.S.D with C 4 or 5. */
  status?: string;
  /** The SMTP reply code (550), when the refusal came in a dialogue. */
  reply?: number;
  /** The reply's text or a DSN's Diagnostic-Code: its enhanced code is used when status has none, and its words decide a generic code. */
  text?: string;
  /**
   * Whether the message will not be tried again: a 5xx, a DSN's Action: failed, a 4xx after the
   * last retry. Default: a class 5 code is final, anything else is not.
   */
  final?: boolean;
  /**
   * The SMTP command refused, when the refusal came in a dialogue (nodemailer's names: "CONN",
   * "EHLO", "AUTH PLAIN", "MAIL FROM", "RCPT TO", "DATA"). Only a refusal at RCPT TO or DATA can
   * be about the recipient; one before (the greeting, EHLO, AUTH, MAIL FROM) is about the sender
   * or its connection, whatever its code says.
   */
  command?: string;
}

/** Commands whose refusal can be about the recipient or the message. */
const ABOUT_THE_RECIPIENT = /^(RCPT|DATA|BDAT)\b/i;

/** How much of a reply's text is read (a diagnostic is one line; a long one is cut here). */
const MAX_TEXT = 4_096;

/**
 * Enhanced status codes whose meaning for the mailbox is fixed, whatever the text says
 * (subject.detail; the class comes with the code).
 */
const BY_CODE: Record<string, { type: BounceType; what: string }> = {
  "1.1": { type: "hard", what: "bad destination mailbox" },
  "1.2": { type: "hard", what: "bad destination system" },
  "1.3": { type: "hard", what: "bad destination mailbox address syntax" },
  "1.4": { type: "hard", what: "destination mailbox address ambiguous" },
  "1.6": { type: "hard", what: "mailbox has moved" },
  "1.7": { type: "policy", what: "bad sender's mailbox address syntax" },
  "1.8": { type: "policy", what: "bad sender's system address" },
  "1.10": { type: "hard", what: "recipient address has null MX" },
  "2.1": { type: "hard", what: "mailbox disabled" },
  "2.2": { type: "soft", what: "mailbox full" },
  "2.3": { type: "policy", what: "message length exceeds administrative limit" },
  "2.4": { type: "soft", what: "mailing list expansion problem" },
  "3.1": { type: "soft", what: "mail system full" },
  "3.2": { type: "soft", what: "system not accepting network messages" },
  "3.3": { type: "policy", what: "system not capable of selected features" },
  "3.4": { type: "policy", what: "message too big for system" },
  "3.5": { type: "soft", what: "system incorrectly configured" },
  "4.4": { type: "hard", what: "unable to route" },
  "7.17": { type: "hard", what: "mailbox owner has changed" },
  "7.18": { type: "hard", what: "domain owner has changed" },
};

/** What a code of each subject means when neither BY_CODE nor the text decides. */
const BY_SUBJECT: Record<string, { type: BounceType; what: string }> = {
  "0": { type: "soft", what: "other or undefined status" },
  "1": { type: "hard", what: "address status" },
  "2": { type: "soft", what: "mailbox status" },
  "3": { type: "soft", what: "mail system status" },
  "4": { type: "soft", what: "network or routing status" },
  "5": { type: "policy", what: "mail delivery protocol status" },
  "6": { type: "policy", what: "message content or media status" },
  "7": { type: "policy", what: "security or policy status" },
};

/**
 * Words of a reply's text, in the order they are tried. Policy comes first: a refusal that names
 * both ("blocked ... user unknown") must not cool the mailbox. Microsoft's unknown-recipient reply
 * ("5.4.1 Recipient address rejected: Access denied") comes before the policy words it contains.
 */
const BY_TEXT: { pattern: RegExp; type: BounceType; what: string }[] = [
  {
    pattern: /recipient address rejected: access denied/i,
    type: "hard",
    what: "recipient rejected (access denied)",
  },
  {
    pattern:
      /\b(spam|junk|bulk mail|blocked|blocklist(ed)?|block list|blacklist(ed)?|denylist(ed)?|rbl|dnsbl|spamhaus|spamcop|barracuda|reputation|policy|content|phish\w*|virus|malware|suspicious|dmarc|dkim|spf|unauthenticated|not authenticated|authentication|sender (address )?(denied|rejected|blocked|unknown|not allowed)|relay(ing)? (access )?denied|not permitted to relay|too many (messages|connections|recipients)|rate limit\w*|message (size|too (big|large))|too large)\b/i,
    type: "policy",
    what: "policy or content",
  },
  {
    pattern:
      /\b(user unknown|unknown user|unknown (recipient|mailbox|address)|no such (user|mailbox|recipient|address|account)|(user|mailbox|recipient|address|account)( name)? (does not|doesn't|did not) exist|does not exist|doesn't exist|(mailbox|recipient|user|address) (unavailable|not found|unknown|invalid)|invalid (recipient|mailbox|address|user)|not a valid (user|mailbox|recipient|address)|(account|mailbox|user) (has been |is )?(disabled|deactivated|suspended|closed|locked|inactive)|unrouteable address|no mailbox here|(doesn't|does not) have an? [\w.-]+ account)\b/i,
    type: "hard",
    what: "no such mailbox",
  },
  {
    pattern:
      /\b(mailbox (is )?full|over ?quota|quota exceeded|exceeded (the |its )?(storage|quota)|insufficient (storage|space|system storage)|out of storage|storage (space )?(full|exceeded)|mailbox size limit)\b/i,
    type: "soft",
    what: "mailbox full",
  },
];

interface EnhancedCode {
  klass: string;
  subject: string;
  detail: string;
}

function readCode(s: string | undefined): EnhancedCode | undefined {
  const m = /^\s*([245])\.(\d{1,3})\.(\d{1,3})(?![\d.]*\d)/.exec(s ?? "");
  return m ? { klass: m[1]!, subject: String(Number(m[2])), detail: String(Number(m[3])) } : undefined;
}

const show = (c: EnhancedCode) => `${c.klass}.${c.subject}.${c.detail}`;

/**
 * The status code a reply's text carries. The rule: a reply code followed by an enhanced code of
 * the same class ("550 5.1.1", "550-5.1.1") wins; else the first enhanced code standing alone with
 * a subject of 0 to 7 ("(#5.1.1)"; not part of a longer dotted number such as an IP address); else
 * a reply code 4xx or 5xx that starts a line or follows a colon, semicolon or parenthesis, and
 * stands before words ("said: 550 User unknown", "smtp; 550 ..."), read as C.0.0.
 */
export function statusInText(text: string): { status: string; reply?: number } | undefined {
  const t = text.slice(0, MAX_TEXT);
  const paired = /(?<![\d.])([45])(\d\d)[ -]+([45])\.(\d{1,3})\.(\d{1,3})(?![\d.]*\d)/g;
  for (const m of t.matchAll(paired)) {
    if (m[1] === m[3]) return { status: `${m[3]}.${Number(m[4])}.${Number(m[5])}`, reply: Number(m[1]! + m[2]!) };
  }
  const alone = /(?<![\d.])([45])\.([0-7])\.(\d{1,3})(?![\d.]*\d)/.exec(t);
  if (alone) return { status: `${alone[1]}.${alone[2]}.${Number(alone[3])}` };
  const bare = /(?:^|[:;(])[ \t]*([45][0-5]\d)[ -](?=[A-Za-z<#([])/m.exec(t);
  if (bare) return { status: `${bare[1]![0]}.0.0`, reply: Number(bare[1]) };
  return undefined;
}

function byText(text: string | undefined): { type: BounceType; what: string } | undefined {
  if (!text) return undefined;
  const t = text.slice(0, MAX_TEXT);
  return BY_TEXT.find((r) => r.pattern.test(t));
}

/** Classifies one refusal or failed delivery: see the rules at the top of this file. */
export function classify(input: RefusalInput): Classification {
  const text = input.text?.slice(0, MAX_TEXT);
  let code = readCode(input.status);
  if (code?.klass === "2") code = undefined; // a success code says nothing about a failure
  const inText = text === undefined ? undefined : statusInText(text);
  // A generic Status (5.0.0, as Postfix writes for a reply without an enhanced code) gives way to
  // a specific code of the same class in the diagnostic.
  const fromText = readCode(inText?.status);
  if (fromText && (!code || (code.subject === "0" && code.klass === fromText.klass))) code = fromText;
  if (!code && input.reply !== undefined && input.reply >= 400 && input.reply < 600) {
    code = { klass: String(input.reply)[0]!, subject: "0", detail: "0" };
  }
  const final = input.final ?? code?.klass === "5";
  if (!final) {
    return { type: "transient", status: code && show(code), rule: code ? `${show(code)}: not final` : "not final" };
  }
  if (input.command !== undefined && !ABOUT_THE_RECIPIENT.test(input.command.trim())) {
    return {
      type: "policy",
      status: code && show(code),
      rule: `refused at ${input.command.trim()}: not about the recipient`,
    };
  }
  if (!code) {
    const words = byText(text);
    if (words) return { type: words.type, status: undefined, rule: `text: ${words.what}` };
    return { type: "soft", status: undefined, rule: "final failure without a status" };
  }
  const status = show(code);
  // A persistent transient failure (4.x.x) that ran out of retries may pass: never hard.
  const soften = (type: BounceType): BounceType => (code.klass === "4" && type === "hard" ? "soft" : type);
  const fixed = BY_CODE[`${code.subject}.${code.detail}`];
  if (fixed) return { type: soften(fixed.type), status, rule: `${status}: ${fixed.what}` };
  const subject = BY_SUBJECT[code.subject] ?? BY_SUBJECT["0"]!;
  if (code.subject !== "7") {
    const words = byText(text);
    if (words) return { type: soften(words.type), status, rule: `${status} and text: ${words.what}` };
  }
  return { type: soften(subject.type), status, rule: `${status}: ${subject.what}` };
}
