// Logs as JSON lines on stderr (pino), or one readable line per record with LOG_FORMAT=pretty
// (pino-pretty). Values are passed explicitly as fields, so a token, a password or a message
// body can never slip into a line by accident; the field names that would hold one are
// redacted all the same.
import pino from "pino";
import pretty from "pino-pretty";

export type Fields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

export type LogFormat = "json" | "pretty";

const SECRET_FIELDS = ["token", "password", "pass", "authorization", "body", "html", "text", "markdown"];

let format: LogFormat = "json";
let root: pino.Logger | undefined;

/** Chooses the format; call before the first line (the processes do, right after reading their configuration). */
export function setLogFormat(f: LogFormat): void {
  format = f;
  root = undefined;
}

/** The asynchronous destination, ended by endLogs(). */
let asyncDest: (pino.DestinationStream & { end(): void; once(event: "close", f: () => void): void }) | undefined;

/**
 * JSON lines are written asynchronously: a line per message must never stall the event loop
 * when whatever reads stderr is slow (a full pipe blocks a synchronous write). What is still
 * buffered is written synchronously when the process exits. The readable format is for people
 * at a terminal and stays synchronous.
 */
function destination(): pino.DestinationStream {
  if (format === "pretty") {
    return pretty({
      destination: 2,
      sync: true,
      colorize: false,
      singleLine: true,
      translateTime: "SYS:HH:MM:ss.l",
      ignore: "pid,hostname,component",
      messageFormat: "{component} {msg}",
    });
  }
  const dest = pino.destination({ dest: 2, sync: false, minLength: 0 });
  asyncDest = dest;
  process.once("exit", () => {
    try {
      dest.flushSync();
    } catch {
      // a write still under way at exit (endLogs() first avoids it)
    }
  });
  return dest;
}

/**
 * Writes every line so far and closes the log: the last thing a process does before it exits.
 * (With minLength 0, sonic-boom's flush() does not wait for a write under way; end() does.)
 */
export function endLogs(): Promise<void> {
  const dest = asyncDest;
  if (!root || !dest) return Promise.resolve();
  asyncDest = undefined;
  return new Promise((done) => {
    dest.once("close", done);
    dest.end();
  });
}

function base(): pino.Logger {
  root ??= pino(
    {
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: SECRET_FIELDS, censor: "[hidden]" },
    },
    destination(),
  );
  return root;
}

function wrap(bindings: Fields): Logger {
  // Resolved per line, so a logger made before setLogFormat still writes in the chosen format.
  let made: { from: pino.Logger; child: pino.Logger } | undefined;
  const write = (level: "info" | "warn" | "error") => (msg: string, fields?: Fields) => {
    const from = base();
    if (made?.from !== from) made = { from, child: from.child(bindings) };
    if (fields) made.child[level](fields, msg);
    else made.child[level](msg);
  };
  return { info: write("info"), warn: write("warn"), error: write("error") };
}

export function logger(component: string): Logger {
  return wrap({ component });
}
