// What an SMTP reply says, read from its text: the reply code, the enhanced status code
// (RFC 3463, "5.1.1"), and a "try again in N minutes" hint. Pure functions over strings, so a
// table of real replies tests them.

export interface Reply {
  /** The three-digit reply code. */
  code: number;
  /** The enhanced status code of the reply's first line, when it carries one ("4.7.28"). */
  enhanced?: string;
  /** The whole reply as received, lines joined with "\n". */
  text: string;
}

const REPLY = /^([2-5]\d\d)[ -](?:([2-5]\.\d{1,3}\.\d{1,3})\b)?/;

/** The reply in text (one or more lines, "250-..." then "250 ..."), or undefined when it is none. */
export function parseReply(text: string): Reply | undefined {
  const m = REPLY.exec(text.trimStart());
  if (!m) return undefined;
  const code = Number(m[1]);
  // An enhanced code whose class contradicts the reply's (a "550 4.2.2") is not believed.
  const enhanced = m[2] !== undefined && m[2][0] === m[1]![0] ? m[2] : undefined;
  return { code, enhanced, text: text.trim() };
}

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000 };
// "try again in 5 minutes", "retry after 300 seconds", "please wait 2 min", "greylisted for 60s"
const HINT =
  /\b(?:try(?:\s+(?:it\s+)?again)?|retry|again|wait|greylisted|deferred|delayed)\b(?:\s+(?:later|in|after|for|at\s+least|up\s+to))*\s+(\d{1,6})\s*(s(?:ec(?:ond)?s?)?|m(?:in(?:ute)?s?)?|h(?:(?:ou)?rs?)?)\b/i;

/**
 * The wait a reply asks for ("451 4.7.1 Greylisted, please try again in 300 seconds"), in ms,
 * or undefined when it names none.
 */
export function retryAfterHint(text: string): number | undefined {
  const m = HINT.exec(text);
  if (!m) return undefined;
  return Number(m[1]) * UNIT_MS[m[2]![0]!.toLowerCase()]!;
}

/** Whether a reply is a receiver saying we send too fast, by one of the patterns (case-insensitive). */
export function matchesAny(text: string, patterns: RegExp[]): boolean {
  return patterns.some((p) => p.test(text));
}
