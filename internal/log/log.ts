// A small line logger: "<time> <level> <component> <message> key=value ...".
// Values are passed explicitly, so a token can never slip into a line by accident.
export type Fields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

export function logger(component: string): Logger {
  const write = (level: string, msg: string, fields?: Fields) => {
    let line = `${new Date().toISOString()} ${level} ${component} ${msg}`;
    for (const [k, v] of Object.entries(fields ?? {})) {
      if (v !== undefined) line += ` ${k}=${typeof v === "string" && /\s/.test(v) ? JSON.stringify(v) : v}`;
    }
    process.stderr.write(`${line}\n`);
  };
  return {
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
  };
}
